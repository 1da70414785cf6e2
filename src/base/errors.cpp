#include "synapse/error.hpp"

namespace synapse {

const char* errc_name(Errc code) noexcept {
  switch (code) {
    case Errc::io: return "io";
    case Errc::format: return "format";
    case Errc::unsupported: return "unsupported";
    case Errc::invalid_argument: return "invalid argument";
    case Errc::out_of_range: return "out of range";
    case Errc::resource: return "resource";
  }
  return "unknown";
}

}  // namespace synapse
