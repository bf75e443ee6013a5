// Shared by the unit tests: expects f() to throw E whose message holds every one of `parts`
// (bad input must be named in the message, not only refused).
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <string>

template <typename E>
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no error";
  } catch (const E& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << e.what() << "\n  missing: " << p;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}
