// base/strings.hpp: split_stripped, the reading of llama.cpp's
// comma-separated flag values (--host, --alias, --tags).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/strings.hpp"

namespace synapse {
namespace {

using Parts = std::vector<std::string>;

TEST(SplitStripped, PartsStrippedEmptyOnesLeftOutInOrder) {
  EXPECT_EQ(split_stripped(" a, ,b ", ','), (Parts{"a", "b"}));
  EXPECT_EQ(split_stripped("127.0.0.1,::1", ','), (Parts{"127.0.0.1", "::1"}));
  EXPECT_EQ(split_stripped("z ,\ty\r\n, x", ','), (Parts{"z", "y", "x"}));
  EXPECT_EQ(split_stripped("one part", ','), (Parts{"one part"}));
  EXPECT_EQ(split_stripped("a,,a", ','), (Parts{"a", "a"}));
  EXPECT_EQ(split_stripped("", ','), Parts{});
  EXPECT_EQ(split_stripped(" , \t,", ','), Parts{});
  EXPECT_EQ(split_stripped("a;b", ';'), (Parts{"a", "b"}));
}

}  // namespace
}  // namespace synapse
