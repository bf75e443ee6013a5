// SHA-256 against FIPS 180-4's examples and HMAC-SHA-256 against RFC 4231's test cases: the job
// token's proofs are only as good as these.
#include <gtest/gtest.h>

#include <string>

#include "exdyna/core/sha256.hpp"

namespace exdyna::core {
namespace {

TEST(Sha256, FipsExamples) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // 56 bytes: the length no longer fits the first padding block.
  EXPECT_EQ(to_hex(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(to_hex(sha256(std::string(1'000'000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256, BlockBoundaries) {
  // Lengths around the 55/56/64-byte padding edges hash differently and deterministically.
  std::string prev;
  for (int n : {54, 55, 56, 63, 64, 65, 119, 120}) {
    const auto h = to_hex(sha256(std::string(static_cast<std::size_t>(n), 'x')));
    EXPECT_EQ(h.size(), 64u);
    EXPECT_NE(h, prev) << n;
    EXPECT_EQ(h, to_hex(sha256(std::string(static_cast<std::size_t>(n), 'x'))));
    prev = h;
  }
}

TEST(HmacSha256, Rfc4231) {
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(to_hex(hmac_sha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(to_hex(hmac_sha256(std::string(20, '\xaa'), std::string(50, '\xdd'))),
            "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe");
  // Test case 6: a key longer than the block is hashed first.
  EXPECT_EQ(to_hex(hmac_sha256(std::string(131, '\xaa'),
                               "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(EqualConstantTime, ComparesWholeStrings) {
  EXPECT_TRUE(equal_constant_time("abc", "abc"));
  EXPECT_FALSE(equal_constant_time("abc", "abd"));
  EXPECT_FALSE(equal_constant_time("abc", "ab"));
  EXPECT_TRUE(equal_constant_time("", ""));
}

}  // namespace
}  // namespace exdyna::core
