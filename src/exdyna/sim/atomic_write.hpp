// The sim layer's atomic file writer (the CSVs of `exdyna simulate`, a recorded trace's
// meta.json).
#pragma once

#include <filesystem>
#include <string>

namespace exdyna::sim {

// Writes content to a temporary file beside path, then renames it over path: readers see the old
// file or the whole new one, and a failure leaves no partial file. Throws Error naming the path.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace exdyna::sim
