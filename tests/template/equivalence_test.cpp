// Every chat template of llama.cpp's collection (tests/data/templates/llama.cpp)
// rendered with every context of tests/data/templates/contexts.json equals
// Python Jinja2's rendering byte for byte (tests/data/templates/expected/,
// written by tests/template/render_expected.py); where Jinja2 raised, synapse
// throws, with the template's own message where it came from raise_exception.
#include <gtest/gtest.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "synapse/error.hpp"
#include "template/jinja.hpp"

namespace synapse::jinja {
namespace {

namespace fs = std::filesystem;

const fs::path kDir = fs::path(SYNAPSE_TEST_DATA) / "templates";

std::string read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kDir / "llama.cpp"))
    if (e.path().extension() == ".jinja") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// contexts.json's "strftime_now" (YYYY-MM-DDTHH:MM:SS) as a std::tm with its
// weekday and day of the year filled in.
std::tm fixed_now(const std::string& iso) {
  std::tm tm{};
  std::sscanf(iso.c_str(), "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
              &tm.tm_sec);
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  const std::time_t t = timegm(&tm);
  gmtime_r(&t, &tm);
  return tm;
}

class LlamaCppTemplates : public testing::TestWithParam<std::string> {};

TEST_P(LlamaCppTemplates, RenderLikeJinja2) {
  const auto spec = nlohmann::ordered_json::parse(read_file(kDir / "contexts.json"));
  const std::tm now = fixed_now(spec["strftime_now"].get<std::string>());
  Options opt;
  opt.now = [now] { return now; };
  const std::string source = read_file(kDir / "llama.cpp" / (GetParam() + ".jinja"));
  const Template t = Template::parse(source, opt);
  const fs::path expected = kDir / "expected" / GetParam();
  size_t checked = 0;
  for (const auto& c : spec["contexts"]) {
    const std::string name = c["name"].get<std::string>();
    SCOPED_TRACE("context " + name);
    const fs::path out = expected / (name + ".out");
    const fs::path err = expected / (name + ".err");
    if (fs::exists(out)) {
      std::string got;
      try {
        got = t.render(c["context"]);
      } catch (const Error& e) {
        ADD_FAILURE() << "threw: " << e.what();
        continue;
      }
      EXPECT_EQ(got, read_file(out));
    } else {
      ASSERT_TRUE(fs::exists(err)) << err;
      const std::string text = read_file(err);
      const std::string kind = text.substr(0, text.find('\n'));
      const std::string message = text.substr(std::min(text.size(), kind.size() + 1));
      try {
        const std::string got = t.render(c["context"]);
        ADD_FAILURE() << "Jinja2 raised " << kind << " (" << message << "); synapse rendered:\n" << got;
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::invalid_argument);
        if (kind == "raise_exception") {
          EXPECT_EQ(std::string(e.what()), message);
        }
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, spec["contexts"].size());
}

std::string test_name(const testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

INSTANTIATE_TEST_SUITE_P(Jinja2, LlamaCppTemplates, testing::ValuesIn(template_names()), test_name);

}  // namespace
}  // namespace synapse::jinja
