// synapse::Error: the one exception type the library throws.
//
// Every failure the user can cause (a bad file, a bad request, an unsupported
// model) is reported as a synapse::Error whose message names the file, key,
// tensor or field and the bad value. A library call never aborts the process.
//
// Thread-safety: Error is an immutable value; errc_name is thread-safe.
#pragma once

#include <stdexcept>
#include <string>

namespace synapse {

// What kind of failure an Error reports; the CLI maps them to exit codes.
enum class Errc {
  io,                // a file could not be opened, read or mapped
  format,            // a file or value is malformed (bad magic, overflow, out of bounds)
  unsupported,       // well-formed but not handled (unknown architecture, tensor type)
  invalid_argument,  // a caller-supplied value is wrong (prompt too long, bad flag)
  out_of_range,      // an index or id outside its valid range
  resource,          // the system refused a resource (a thread, a mapping of memory)
};

// Name of an error category, e.g. "format".
const char* errc_name(Errc code) noexcept;

class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  Errc code_;
};

}  // namespace synapse
