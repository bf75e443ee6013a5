// The one way exdyna replaces an output file: readers see the old file or the whole new one.
#pragma once

#include <filesystem>
#include <string_view>

namespace exdyna::core {

// Writes content to a hidden temporary file beside path (so the rename stays within one file
// system), fsyncs it, then renames it over path. A failure leaves the old file (if any) untouched
// and no temporary behind. Does not create missing directories. Throws Error naming the path.
void write_file_atomic(const std::filesystem::path& path, std::string_view content);

}  // namespace exdyna::core
