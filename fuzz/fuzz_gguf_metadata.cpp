// libFuzzer target: the input is a *description* of a GGUF file, not the file.
// The harness always writes a valid header ("GGUF", version 2 or 3, counts),
// so mutations spend their time on metadata values and tensor infos instead
// of the magic. The description (read with FuzzedDataProvider):
//
//   flags        u8: bit 0 version 2 (else 3); bit 1 start from the template
//                (stories260K-q4_0.gguf's metadata and tensors, a loadable
//                llama model); bits 2-3 general.alignment: keep / 32 / 64 / fuzzed
//                u32; bit 4 lie about the tensor count, bit 5 the kv count;
//                bit 6 truncate the image at a fuzzed length
//   ops          repeated until the input ends; one u8 chooses:
//     add kv       key (known key table or fuzzed string) + a typed value
//     set kv       replace the value of an existing kv
//     raw kv       key + raw u32 type id + raw value bytes (lying lengths,
//                  unknown types, truncated arrays)
//     drop kv      remove an entry
//     add tensor   name (known name table, layer index, or fuzzed), n_dims,
//                  dims, type id (small or raw u32), offset (next aligned
//                  or fuzzed)
//     edit tensor  one field of an existing tensor info
//     drop tensor  remove a tensor
//   Tensor data is laid out after the infos (up to 8 MiB in total); tensors
//   keep their template bytes, new ones are filled with a fuzzed byte.
//
// The image then goes through the same path as fuzz_gguf: File::from_bytes,
// read_hparams, load_model. Any exception other than synapse::Error, and every
// sanitizer finding, is a crash.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/hparams.hpp"
#include "model/model.hpp"
#include "synapse/error.hpp"
#include "synapse/gguf.hpp"

using namespace synapse;
using gguf::Value;
using gguf::ValueType;

namespace {

constexpr uint64_t kMaxDataBytes = 8ull << 20;

const char* const kKeys[] = {
    "general.architecture", "general.alignment", "general.name", "general.file_type",
    "general.quantization_version",
    "llama.context_length", "llama.embedding_length", "llama.block_count",
    "llama.feed_forward_length", "llama.attention.head_count", "llama.attention.head_count_kv",
    "llama.attention.key_length", "llama.attention.value_length", "llama.rope.dimension_count",
    "llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base", "llama.rope.scaling.type",
    "llama.rope.scaling.factor", "llama.rope.scaling.attn_factor",
    "llama.rope.scaling.original_context_length", "llama.attention.sliding_window",
    "llama.expert_count", "llama.expert_used_count", "llama.vocab_size",
    "mistral.block_count", "qwen2.block_count", "phi3.block_count",
    "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
    "tokenizer.ggml.scores", "tokenizer.ggml.token_type", "tokenizer.ggml.merges",
    "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
    "tokenizer.ggml.eom_token_id", "tokenizer.ggml.unknown_token_id",
    "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token", "tokenizer.ggml.add_space_prefix",
    "tokenizer.ggml.remove_extra_whitespaces", "tokenizer.chat_template",
};
const char* const kArchs[] = {"llama", "mistral", "qwen2", "phi3", "gpt2", ""};
const char* const kTensorSuffixes[] = {
    "attn_norm.weight", "ffn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
    "attn_output.weight", "attn_qkv.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias",
    "attn_output.bias", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
    "ffn_gate_inp.weight", "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight",
    "ffn_gate.0.weight", "ffn_up.0.weight", "ffn_down.0.weight",
};
const char* const kGlobalTensors[] = {"token_embd.weight", "output_norm.weight", "output.weight",
                                      "rope_freqs.weight"};

struct Tensor {
  std::string name;
  uint32_t n_dims = 1;
  uint64_t ne[4] = {1, 1, 1, 1};
  uint32_t type = 0;
  std::optional<uint64_t> offset;   // fuzzed offset; nullopt = next aligned
  std::vector<uint8_t> data;        // template bytes (else filled)
  uint8_t fill = 0;
};

struct RawKv {
  std::string key;
  uint32_t type = 0;
  std::vector<uint8_t> bytes;       // encoded value, written verbatim
};

struct Desc {
  std::vector<RawKv> kv;
  std::vector<Tensor> tensors;
};

// Little-endian writer.
struct Out {
  std::vector<uint8_t> b;
  void put(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  void u32(uint32_t v) { put(&v, 4); }
  void u64(uint64_t v) { put(&v, 8); }
  void str(const std::string& s) {
    u64(s.size());
    put(s.data(), s.size());
  }
};

void encode_value(Out& o, const Value& v) {
  switch (v.type) {
    case ValueType::UINT8: { uint8_t x = static_cast<uint8_t>(v.u); o.put(&x, 1); break; }
    case ValueType::INT8: { int8_t x = static_cast<int8_t>(v.i); o.put(&x, 1); break; }
    case ValueType::UINT16: { uint16_t x = static_cast<uint16_t>(v.u); o.put(&x, 2); break; }
    case ValueType::INT16: { int16_t x = static_cast<int16_t>(v.i); o.put(&x, 2); break; }
    case ValueType::UINT32: o.u32(static_cast<uint32_t>(v.u)); break;
    case ValueType::INT32: { int32_t x = static_cast<int32_t>(v.i); o.put(&x, 4); break; }
    case ValueType::FLOAT32: { float x = static_cast<float>(v.f); o.put(&x, 4); break; }
    case ValueType::BOOL: { uint8_t x = v.b; o.put(&x, 1); break; }
    case ValueType::STRING: o.str(v.str); break;
    case ValueType::UINT64: o.u64(v.u); break;
    case ValueType::INT64: o.put(&v.i, 8); break;
    case ValueType::FLOAT64: o.put(&v.f, 8); break;
    case ValueType::ARRAY:
      o.u32(static_cast<uint32_t>(v.elem_type));
      o.u64(v.items.size());
      for (const Value& it : v.items) encode_value(o, it);
      break;
  }
}

std::string fuzz_string(FuzzedDataProvider& p, size_t max_len) {
  return p.ConsumeRandomLengthString(max_len);
}

// A well-formed value of a fuzzed type, encoded. `depth` bounds the nesting
// at 10 (above the reader's cap of 8, so the cap is exercised).
void fuzz_value(FuzzedDataProvider& p, Out& o, uint32_t type, int depth) {
  switch (static_cast<ValueType>(type)) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::BOOL: {
      uint8_t x = p.ConsumeIntegral<uint8_t>();
      o.put(&x, 1);
      break;
    }
    case ValueType::UINT16: case ValueType::INT16: {
      uint16_t x = p.ConsumeIntegral<uint16_t>();
      o.put(&x, 2);
      break;
    }
    case ValueType::UINT32: case ValueType::INT32: {
      // Small values are the interesting ones for hyperparameters.
      const uint32_t x = p.ConsumeBool() ? p.ConsumeIntegralInRange<uint32_t>(0, 300)
                                         : p.ConsumeIntegral<uint32_t>();
      o.u32(x);
      break;
    }
    case ValueType::FLOAT32: {
      float x = p.ConsumeBool() ? p.ConsumeFloatingPoint<float>()
                                : static_cast<float>(p.ConsumeIntegralInRange<int>(-4, 100000));
      o.put(&x, 4);
      break;
    }
    case ValueType::UINT64: case ValueType::INT64: {
      const uint64_t x = p.ConsumeBool() ? p.ConsumeIntegralInRange<uint64_t>(0, 300)
                                         : p.ConsumeIntegral<uint64_t>();
      o.u64(x);
      break;
    }
    case ValueType::FLOAT64: {
      double x = p.ConsumeFloatingPoint<double>();
      o.put(&x, 8);
      break;
    }
    case ValueType::STRING: {
      if (p.ConsumeBool()) o.str(kArchs[p.ConsumeIntegralInRange<size_t>(0, std::size(kArchs) - 1)]);
      else o.str(fuzz_string(p, 64));
      break;
    }
    case ValueType::ARRAY: {
      const uint32_t et = p.ConsumeIntegralInRange<uint32_t>(0, 12);
      const uint32_t n = depth >= 10 ? 0 : p.ConsumeIntegralInRange<uint32_t>(0, 600);
      o.u32(et);
      o.u64(n);
      for (uint32_t k = 0; k < n && p.remaining_bytes() > 0; ++k) fuzz_value(p, o, et, depth + 1);
      break;  // an array cut short by the end of input claims more items than it holds
    }
    default: break;  // unknown type: no value bytes
  }
}

std::string fuzz_key(FuzzedDataProvider& p) {
  if (p.ConsumeBool()) return kKeys[p.ConsumeIntegralInRange<size_t>(0, std::size(kKeys) - 1)];
  return fuzz_string(p, 48);
}

std::string fuzz_tensor_name(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: return kGlobalTensors[p.ConsumeIntegralInRange<size_t>(0, std::size(kGlobalTensors) - 1)];
    case 1:
      return "blk." + std::to_string(p.ConsumeIntegralInRange<int>(0, 6)) + "." +
             kTensorSuffixes[p.ConsumeIntegralInRange<size_t>(0, std::size(kTensorSuffixes) - 1)];
    default: return fuzz_string(p, 48);
  }
}

uint64_t fuzz_dim(FuzzedDataProvider& p) {
  switch (p.ConsumeIntegralInRange<int>(0, 3)) {
    case 0: return p.ConsumeIntegralInRange<uint64_t>(1, 8) * 32;  // block multiples
    case 1: return p.ConsumeIntegralInRange<uint64_t>(0, 600);
    case 2: return uint64_t{1} << p.ConsumeIntegralInRange<int>(0, 63);
    default: return p.ConsumeIntegral<uint64_t>();
  }
}

uint32_t fuzz_type_id(FuzzedDataProvider& p) {
  return p.ConsumeBool() ? p.ConsumeIntegralInRange<uint32_t>(0, 41) : p.ConsumeIntegral<uint32_t>();
}

const Desc& template_desc() {
  static const Desc d = [] {
    Desc t;
    const gguf::File f = gguf::File::open(SYNAPSE_TEST_DATA "/models/stories260K-q4_0.gguf");
    for (const gguf::KeyValue& kv : f.metadata()) {
      if (kv.key == "general.alignment") continue;  // chosen by the flags
      Out o;
      encode_value(o, kv.value);
      t.kv.push_back({kv.key, static_cast<uint32_t>(kv.value.type), std::move(o.b)});
    }
    for (const gguf::TensorInfo& ti : f.tensors()) {
      Tensor x;
      x.name = ti.name;
      x.n_dims = ti.n_dims;
      for (int k = 0; k < 4; ++k) x.ne[k] = static_cast<uint64_t>(ti.ne[k]);
      x.type = static_cast<uint32_t>(ti.type);
      x.data.assign(ti.data, ti.data + ti.n_bytes);
      t.tensors.push_back(std::move(x));
    }
    return t;
  }();
  return d;
}

// Bytes of a tensor's data as the reader computes them, or nullopt when it
// overflows, the type is unknown or the block size does not divide ne[0].
std::optional<uint64_t> data_size(const Tensor& t) {
  const TypeTraits& tt = type_traits(t.type);
  if (!tt.known || tt.block_size == 0 || t.ne[0] % tt.block_size != 0) return std::nullopt;
  uint64_t n = t.ne[0] / tt.block_size * tt.type_size;
  for (uint32_t d = 1; d < 4 && d < t.n_dims; ++d)
    if (__builtin_mul_overflow(n, t.ne[d], &n)) return std::nullopt;
  return n;
}

std::vector<uint8_t> build(FuzzedDataProvider& p) {
  const uint8_t flags = p.ConsumeIntegral<uint8_t>();
  Desc d;
  if (flags & 2) d = template_desc();
  uint64_t alignment = 32;
  switch ((flags >> 2) & 3) {
    case 0: break;
    case 1: d.kv.push_back({"general.alignment", 4, {32, 0, 0, 0}}); break;
    case 2: d.kv.push_back({"general.alignment", 4, {64, 0, 0, 0}}); alignment = 64; break;
    case 3: {
      const uint32_t a = p.ConsumeIntegral<uint32_t>();
      d.kv.push_back({"general.alignment", 4, {}});
      d.kv.back().bytes.resize(4);
      std::memcpy(d.kv.back().bytes.data(), &a, 4);
      if (a != 0 && (a & (a - 1)) == 0 && a <= (1u << 20)) alignment = a;
      break;
    }
  }
  const uint64_t lie_tensors = (flags & 16) ? p.ConsumeIntegral<uint64_t>() : 0;
  const uint64_t lie_kv = (flags & 32) ? p.ConsumeIntegral<uint64_t>() : 0;
  const size_t truncate_at = (flags & 64) ? p.ConsumeIntegral<uint32_t>() : SIZE_MAX;

  while (p.remaining_bytes() > 0) {
    switch (p.ConsumeIntegralInRange<int>(0, 7)) {
      case 0: {  // add kv
        RawKv kv{fuzz_key(p), p.ConsumeIntegralInRange<uint32_t>(0, 12), {}};
        Out o;
        fuzz_value(p, o, kv.type, 0);
        kv.bytes = std::move(o.b);
        d.kv.push_back(std::move(kv));
        break;
      }
      case 1: {  // set kv
        if (d.kv.empty()) break;
        RawKv& kv = d.kv[p.ConsumeIntegralInRange<size_t>(0, d.kv.size() - 1)];
        kv.type = p.ConsumeIntegralInRange<uint32_t>(0, 12);
        Out o;
        fuzz_value(p, o, kv.type, 0);
        kv.bytes = std::move(o.b);
        break;
      }
      case 2: {  // raw kv
        RawKv kv{fuzz_key(p), p.ConsumeIntegral<uint32_t>(), {}};
        const std::string raw = fuzz_string(p, 64);
        kv.bytes.assign(raw.begin(), raw.end());
        d.kv.push_back(std::move(kv));
        break;
      }
      case 3:  // drop kv
        if (!d.kv.empty()) d.kv.erase(d.kv.begin() + p.ConsumeIntegralInRange<size_t>(0, d.kv.size() - 1));
        break;
      case 4: {  // add tensor
        Tensor t;
        t.name = fuzz_tensor_name(p);
        t.n_dims = p.ConsumeIntegralInRange<uint32_t>(0, 5);
        for (uint32_t k = 0; k < t.n_dims && k < 4; ++k) t.ne[k] = fuzz_dim(p);
        t.type = fuzz_type_id(p);
        if (p.ConsumeIntegralInRange<int>(0, 7) == 0) t.offset = p.ConsumeIntegral<uint64_t>();
        t.fill = p.ConsumeIntegral<uint8_t>();
        d.tensors.push_back(std::move(t));
        break;
      }
      case 5: {  // edit tensor
        if (d.tensors.empty()) break;
        Tensor& t = d.tensors[p.ConsumeIntegralInRange<size_t>(0, d.tensors.size() - 1)];
        switch (p.ConsumeIntegralInRange<int>(0, 4)) {
          case 0: t.n_dims = p.ConsumeIntegralInRange<uint32_t>(0, 5); break;
          case 1: t.ne[p.ConsumeIntegralInRange<int>(0, 3)] = fuzz_dim(p); break;
          case 2: t.type = fuzz_type_id(p); break;
          case 3: t.offset = p.ConsumeIntegral<uint64_t>(); break;
          default: t.name = fuzz_tensor_name(p); break;
        }
        t.data.clear();  // refilled from `fill`
        t.fill = p.ConsumeIntegral<uint8_t>();
        break;
      }
      case 6:  // drop tensor
        if (!d.tensors.empty())
          d.tensors.erase(d.tensors.begin() + p.ConsumeIntegralInRange<size_t>(0, d.tensors.size() - 1));
        break;
      default: {  // a float-heavy edit: an F32 scalar for a known key
        RawKv kv{kKeys[p.ConsumeIntegralInRange<size_t>(0, std::size(kKeys) - 1)], 6, {}};
        float x = p.ConsumeFloatingPoint<float>();
        kv.bytes.resize(4);
        std::memcpy(kv.bytes.data(), &x, 4);
        d.kv.push_back(std::move(kv));
        break;
      }
    }
  }

  // Lay out offsets: next aligned position unless fuzzed.
  std::vector<uint64_t> offsets, sizes;
  uint64_t data_end = 0;
  for (const Tensor& t : d.tensors) {
    const uint64_t size = data_size(t).value_or(0);
    const uint64_t off = t.offset.value_or((data_end + alignment - 1) / alignment * alignment);
    offsets.push_back(off);
    sizes.push_back(size);
    if (!t.offset && size <= kMaxDataBytes && off + size <= kMaxDataBytes) data_end = off + size;
  }

  Out o;
  o.put("GGUF", 4);
  o.u32((flags & 1) ? 2 : 3);
  o.u64((flags & 16) ? lie_tensors : d.tensors.size());
  o.u64((flags & 32) ? lie_kv : d.kv.size());
  for (const RawKv& kv : d.kv) {
    o.str(kv.key);
    o.u32(kv.type);
    o.put(kv.bytes.data(), kv.bytes.size());
  }
  for (size_t k = 0; k < d.tensors.size(); ++k) {
    const Tensor& t = d.tensors[k];
    o.str(t.name);
    o.u32(t.n_dims);
    for (uint32_t j = 0; j < t.n_dims && j < 4; ++j) o.u64(t.ne[j]);
    for (uint32_t j = 4; j < t.n_dims; ++j) o.u64(1);
    o.u32(t.type);
    o.u64(offsets[k]);
  }
  const uint64_t data_start = (o.b.size() + alignment - 1) / alignment * alignment;
  o.b.resize(data_start + data_end, 0);
  for (size_t k = 0; k < d.tensors.size(); ++k) {
    const Tensor& t = d.tensors[k];
    if (offsets[k] >= data_end || sizes[k] > data_end - offsets[k]) continue;
    uint8_t* dst = o.b.data() + data_start + offsets[k];
    if (sizes[k] == 0) continue;  // (memcpy/memset from an empty vector's null data is UB)
    if (t.data.size() == sizes[k]) std::memcpy(dst, t.data.data(), t.data.size());
    else std::memset(dst, t.fill, sizes[k]);
  }
  if (truncate_at < o.b.size()) o.b.resize(truncate_at);
  return o.b;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider p(data, size);
  const std::vector<uint8_t> image = build(p);
  try {
    gguf::File file = gguf::File::from_bytes(image, "fuzz-metadata.gguf");
    try {
      (void)model::read_hparams(file);
    } catch (const Error&) {
    }
    auto m = model::load_model(std::move(file));
    if (m->tokenizer->n_vocab() <= 0) __builtin_trap();
  } catch (const Error&) {
  }
  return 0;
}
