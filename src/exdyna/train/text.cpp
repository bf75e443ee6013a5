#include "exdyna/train/text.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <unordered_map>

#include "exdyna/core/error.hpp"

namespace exdyna::train {
namespace fs = std::filesystem;
namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw DataError("cannot read " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> w;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ws(line);
    std::string tok;
    bool any = false;
    while (ws >> tok) {
      w.push_back(tok);
      any = true;
    }
    if (any) w.push_back("<eos>");
  }
  return w;
}

// Lower-case; punctuation characters become tokens of their own.
std::string normalise(const std::string& text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '\'' || c == '-' || std::isspace(u) || u >= 0x80) {
      out += static_cast<char>(std::tolower(u));
    } else {
      out += ' ';
      out += c;
      out += ' ';
    }
  }
  return out;
}

}  // namespace

TextCorpus build_corpus(const std::string& train, const std::string& valid, const std::string& test,
                        std::string source) {
  TextCorpus c;
  c.source = std::move(source);
  const auto tw = words_of(train);
  EXDYNA_CHECK_T(DataError, !tw.empty(), "text corpus ", c.source, ": the training split is empty");
  // Vocabulary ordered by first appearance in train: deterministic.
  std::unordered_map<std::string, std::int32_t> id;
  auto add = [&](const std::string& w) {
    auto [it, fresh] = id.emplace(w, static_cast<std::int32_t>(c.vocab.size()));
    if (fresh) c.vocab.push_back(w);
    return it->second;
  };
  add("<unk>");
  add("<eos>");
  for (const auto& w : tw) c.train.push_back(add(w));
  auto map_split = [&](const std::string& text, std::vector<std::int32_t>& out) {
    for (const auto& w : words_of(text)) {
      auto it = id.find(w);
      out.push_back(it == id.end() ? 0 : it->second);
    }
  };
  map_split(valid, c.valid);
  map_split(test, c.test);
  return c;
}

TextCorpus load_wikitext2(const std::string& dir) {
  std::string parts[3];
  const char* names[3] = {"wiki.train.tokens", "wiki.valid.tokens", "wiki.test.tokens"};
  for (int i = 0; i < 3; ++i) {
    const auto p = fs::path(dir) / names[i];
    if (!fs::exists(p))
      throw DataError("WikiText-2 not found: " + p.string() +
                      " does not exist; pass --data-dir DIR pointing at the directory holding "
                      "wiki.train.tokens, "
                      "wiki.valid.tokens and wiki.test.tokens");
    parts[i] = read_all(p);
  }
  return build_corpus(parts[0], parts[1], parts[2], "wikitext-2 (" + dir + ")");
}

std::string default_text_dir() {
  return "/usr/share/common-licenses";
}

TextCorpus load_embedded_corpus(const std::string& dir_in) {
  const std::string dir = dir_in.empty() ? default_text_dir() : dir_in;
  if (!fs::is_directory(dir))
    throw DataError("text corpus directory " + dir +
                    " does not exist; it comes with Debian's essential package base-files, or pass "
                    "--data-dir DIR "
                    "with plain-text files");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && !e.is_symlink()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  EXDYNA_CHECK_T(DataError, !files.empty(), "text corpus directory ", dir,
                 " holds no regular files");
  std::string tr, va, te;
  for (const auto& f : files) {
    std::vector<std::string> lines;
    std::istringstream in(normalise(read_all(f)));
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    const std::size_t n = lines.size();
    const std::size_t a = n * 90 / 100, b = n * 95 / 100;
    for (std::size_t i = 0; i < n; ++i) (i < a ? tr : i < b ? va : te) += lines[i] + "\n";
  }
  return build_corpus(tr, va, te, "embedded English text (" + dir + ")");
}

}  // namespace exdyna::train
