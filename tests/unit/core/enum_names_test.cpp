// core/enum_names.hpp: one table gives to_string and parse; parse refuses an unknown name listing
// the accepted ones, aliases accepted but not listed.
#include "exdyna/core/enum_names.hpp"

#include <gtest/gtest.h>

#include "exdyna/core/topk_select.hpp"
#include "exdyna/sparsifiers/exdyna/exdyna_options.hpp"
#include "unit/expect_error.hpp"

using namespace exdyna;
using namespace exdyna::core;
using namespace exdyna::sparsifiers;

namespace {

enum class Color { kRed, kGreen, kBlue, kUnnamed };
constexpr EnumNames<Color, 4> kColors{{{Color::kRed, "red"},
                                       {Color::kGreen, "green"},
                                       {Color::kBlue, "blue"},
                                       {Color::kRed, "rouge"}}};

TEST(EnumNames, ToStringAndParseReadOneTable) {
  static_assert(std::string_view(enum_to_string(kColors, Color::kGreen)) == "green");
  EXPECT_STREQ(enum_to_string(kColors, Color::kRed), "red");  // the first name, not the alias
  EXPECT_STREQ(enum_to_string(kColors, Color::kUnnamed), "?");
  for (auto c : {Color::kRed, Color::kGreen, Color::kBlue})
    EXPECT_EQ(enum_parse(kColors, "color", enum_to_string(kColors, c)), c);
  EXPECT_EQ(enum_parse(kColors, "color", "rouge"), Color::kRed);
}

TEST(EnumNames, UnknownNameIsRefusedListingTheAllowedOnes) {
  expect_error<InvalidArgument>([] { enum_parse(kColors, "color", "Red"); },
                                {"color 'Red' is not valid; expected 'red', 'green' or 'blue'"});
  EXPECT_EQ(enum_name_list(kColors), "'red', 'green' or 'blue'");
}

// The messages the command-line tests match stay as they were.
TEST(EnumNames, ProjectEnumsKeepTheirMessages) {
  expect_error<InvalidArgument>(
      [] { parse_controller("fuzzy"); },
      {"controller 'fuzzy' is not valid; expected 'paper', 'histogram' or 'exact'"});
  expect_error<InvalidArgument>([] { parse_balance("x"); },
                                {"balance 'x' is not valid; expected 'paper' or 'exact'"});
  expect_error<InvalidArgument>(
      [] { parse_topk_method("q"); },
      {"top-k method 'q' is not valid; expected 'nth_element' or 'heap'"});
  for (auto c : {Controller::kPaper, Controller::kHistogram, Controller::kExact})
    EXPECT_EQ(parse_controller(to_string(c)), c);
}

}  // namespace
