// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Atomic file writes: a crash, a full disk or an exception never leaves a half-written file under the
// target name. Bytes go to a temporary file in the same folder (same filesystem, so rename is atomic),
// which is fsync'ed, renamed over the target, and then the folder is fsync'ed so the rename itself is
// durable. On any failure — or if the writer is destroyed without commit() — the temporary is removed and
// the previous target (if any) is left untouched.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tandem {

// Writes `bytes` to `path` atomically. Throws Error{Io} naming the path (and errno text) on failure.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);
void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes);

// Streaming atomic writer for big files (safetensors, checkpoints): write() as many times as needed, then
// commit(). Writes are buffered (1 MiB) and large writes bypass the buffer. Not thread-safe.
class AtomicFileWriter {
public:
    // Creates the temporary "<dir>/.<name>.tmp-<pid>-<n>" (mode 0666 & ~umask). The folder must exist.
    explicit AtomicFileWriter(std::filesystem::path target);
    ~AtomicFileWriter();  // discards (closes and unlinks the temporary) unless committed
    AtomicFileWriter(const AtomicFileWriter&) = delete;
    AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

    void write(const void* data, size_t size);
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }
    void write(std::span<const std::byte> bytes) { write(bytes.data(), bytes.size()); }

    // Flush, fsync, close, rename over the target, fsync the folder. After commit() the writer is inert.
    void commit();
    // Gives up: closes and removes the temporary. Safe to call more than once.
    void discard() noexcept;

    uint64_t bytes_written() const noexcept { return written_; }
    const std::filesystem::path& target() const noexcept { return target_; }
    const std::filesystem::path& temp_path() const noexcept { return temp_; }

private:
    void flush_buffer();
    void write_fd(const std::byte* data, size_t size);
    [[noreturn]] void fail(const std::string& what, int err);

    std::filesystem::path target_;
    std::filesystem::path temp_;
    int fd_ = -1;
    bool done_ = false;
    uint64_t written_ = 0;
    std::vector<std::byte> buffer_;
    size_t buffered_ = 0;
};

}  // namespace tandem
