// synapse::Error -> Python exceptions. Each category gets a class deriving from
// synapse.Error and from the built-in exception Python code expects for it, so
// both `except synapse.Error` and `except ValueError` work:
//
//   Errc::io               FileError(Error, OSError)
//     (missing file)         ModelNotFoundError(FileError, FileNotFoundError, ValueError)
//                              (llama-cpp-python raises ValueError for a missing model)
//   Errc::format           FormatError(Error, ValueError)
//   Errc::unsupported      UnsupportedError(Error, ValueError)
//   Errc::invalid_argument InvalidArgumentError(Error, ValueError)
//   Errc::out_of_range     OutOfRangeError(Error, ValueError)
#include <Python.h>

#include "bindings.hpp"
#include "synapse/error.hpp"

namespace py = pybind11;

namespace synapse::python {
namespace {

// Owned by the module (added as attributes); these are borrowed pointers.
PyObject* g_by_code[5] = {};
PyObject* g_not_found = nullptr;

PyObject* make(py::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  const std::string qualified = std::string("synapse.") + name;
  py::tuple t(bases.size());
  size_t i = 0;
  for (PyObject* b : bases) t[i++] = py::reinterpret_borrow<py::object>(b);
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, t.ptr(), nullptr);
  if (!cls) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

}  // namespace

void register_errors(py::module_& m) {
  PyObject* base = make(m, "Error", {PyExc_Exception},
                        "Base of every error synapse raises; the message is the library's (it names the file, "
                        "key, tensor or field and the bad value).");
  PyObject* io = make(m, "FileError", {base, PyExc_OSError}, "A file could not be opened, read or mapped.");
  g_not_found = make(m, "ModelNotFoundError", {io, PyExc_FileNotFoundError, PyExc_ValueError},
                     "The model file does not exist (a FileNotFoundError, and a ValueError as in llama-cpp-python).");
  g_by_code[static_cast<int>(Errc::io)] = io;
  g_by_code[static_cast<int>(Errc::format)] =
      make(m, "FormatError", {base, PyExc_ValueError}, "A file or value is malformed.");
  g_by_code[static_cast<int>(Errc::unsupported)] = make(
      m, "UnsupportedError", {base, PyExc_ValueError}, "Well-formed but not handled (architecture, tensor type).");
  g_by_code[static_cast<int>(Errc::invalid_argument)] =
      make(m, "InvalidArgumentError", {base, PyExc_ValueError}, "A caller-supplied value is wrong.");
  g_by_code[static_cast<int>(Errc::out_of_range)] =
      make(m, "OutOfRangeError", {base, PyExc_ValueError}, "An index or token id outside its valid range.");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      const int code = static_cast<int>(e.code());
      PyErr_SetString(code >= 0 && code < 5 ? g_by_code[code] : g_by_code[0], e.what());
    }
  });
}

BusyGuard::BusyGuard(std::atomic<bool>& flag, const char* what) : flag_(&flag) {
  bool expected = false;
  if (!flag.compare_exchange_strong(expected, true))
    throw Error(Errc::invalid_argument, std::string(what) + " is in use by another thread (one call at a time)");
}

void raise_not_found(const std::string& message) {
  PyErr_SetString(g_not_found, message.c_str());
  throw py::error_already_set();
}

}  // namespace synapse::python
