// Word-level text corpora for language models: WikiText-2 token files, and an embedded default
// corpus of English text that every Debian system ships (base-files' /usr/share/common-licenses:
// ~48k words of licence prose), split into train/valid/test deterministically. Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace exdyna::train {

struct TextCorpus {
  std::string source;
  std::vector<std::string> vocab;  // id -> word; built from the training split, plus <unk>, <eos>
  std::vector<std::int32_t> train, valid, test;
  std::int64_t vocab_size() const { return static_cast<std::int64_t>(vocab.size()); }
};

// WikiText-2: dir holds wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens. Throws DataError
// naming the missing file and the --data-dir flag.
TextCorpus load_wikitext2(const std::string& dir);

// The embedded default: every regular file of dir (default /usr/share/common-licenses, from the
// essential package base-files), in name order; lower-cased, punctuation split off; each file's
// lines go 90% / 5% / 5% to train / valid / test by position.
std::string default_text_dir();
TextCorpus load_embedded_corpus(const std::string& dir);

// Builds a corpus from three texts (tokens separated by whitespace; <eos> after each line).
TextCorpus build_corpus(const std::string& train, const std::string& valid, const std::string& test,
                        std::string source);

}  // namespace exdyna::train
