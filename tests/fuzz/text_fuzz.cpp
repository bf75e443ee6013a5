// The word-level text readers (train/text): the input is split at its first two NUL bytes into
// wiki.train.tokens, wiki.valid.tokens and wiki.test.tokens, loaded as WikiText-2 and as the
// embedded corpus (which normalises case and punctuation of every file in the directory).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "exdyna/train/text.hpp"
#include "fuzz_support.hpp"

namespace {

void check(const exdyna::train::TextCorpus& c) {
  for (const auto* split : {&c.train, &c.valid, &c.test})
    for (auto id : *split)
      if (id < 0 || id >= c.vocab_size()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace exdyna;
  const auto dir = fuzz::scratch_dir() / "text";
  static const bool made = std::filesystem::create_directories(dir);
  (void)made;
  std::string_view rest = fuzz::as_text(data, size);
  const char* names[3] = {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"};
  for (int i = 0; i < 3; ++i) {
    const auto cut = i < 2 ? rest.find('\0') : std::string_view::npos;
    const auto part = rest.substr(0, cut);
    fuzz::write_bytes(dir / names[i], reinterpret_cast<const std::uint8_t*>(part.data()),
                      part.size());
    rest = cut == std::string_view::npos ? std::string_view{} : rest.substr(cut + 1);
  }
  fuzz::refuse_only_with_our_errors([&] { check(train::load_wikitext2(dir.string())); });
  fuzz::refuse_only_with_our_errors([&] { check(train::load_embedded_corpus(dir.string())); });
  return 0;
}
