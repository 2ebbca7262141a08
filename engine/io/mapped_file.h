// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MappedFile — a read-only, whole-file POSIX memory mapping with an RAII owner.
// Weights are mapped rather than read so a 16 GB checkpoint costs no heap and pages are loaded on demand.
// The descriptor is closed right after mmap (the mapping keeps the file alive). Known limit: if another
// process truncates the file while it is mapped, touching the lost pages raises SIGBUS; model folders are
// treated as read-only inputs, so this is accepted rather than guarded.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>

namespace tandem {

class MappedFile {
public:
    MappedFile() = default;
    // Maps the whole file. Throws Error{Io} naming the path when it is missing, a directory, or cannot be
    // opened or mapped. An empty file gives an empty (valid) mapping.
    explicit MappedFile(const std::filesystem::path& path);
    ~MappedFile();

    MappedFile(MappedFile&& other) noexcept;
    MappedFile& operator=(MappedFile&& other) noexcept;
    MappedFile(const MappedFile&) = delete;
    MappedFile& operator=(const MappedFile&) = delete;

    const std::byte* data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
    const std::filesystem::path& path() const noexcept { return path_; }

    // Hints for the kernel's read-ahead (madvise); failures are ignored because they are only hints.
    void advise_sequential() const noexcept;
    void advise_willneed(size_t offset, size_t length) const noexcept;

private:
    void release() noexcept;

    std::filesystem::path path_;
    std::byte* data_ = nullptr;
    size_t size_ = 0;
};

}  // namespace tandem
