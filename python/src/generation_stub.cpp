#include "bindings.hpp"
namespace synapse::python {
void bind_generation(pybind11::module_& m) {}
}
