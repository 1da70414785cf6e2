#include "template/jinja.hpp"

#include <nlohmann/json.hpp>

#include "template/interp.hpp"
#include "template/parser.hpp"

namespace synapse::jinja {

Template Template::parse(std::string_view source, const Options& options) {
  auto impl = std::make_shared<TemplateImpl>();
  impl->options = options;
  impl->body = parse_template(source, impl->options);
  return Template(std::move(impl));
}

std::string Template::render(const nlohmann::ordered_json& context) const {
  Interp in(*impl_);
  return in.render(context);
}

}  // namespace synapse::jinja
