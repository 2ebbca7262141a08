// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Atomic writes: temp file in the same folder -> fsync -> rename -> fsync(folder). See atomic_file.h.
#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "tandem/error.h"

namespace tandem {

namespace {

constexpr size_t kBufferSize = size_t(1) << 20;

std::atomic<uint64_t> g_temp_counter{0};

// Fault injection for the disk-full tests (never a setting): with TANDEM_FAULT_ENOSPC_AFTER=N in the
// environment, the atomic writes of this process fail with ENOSPC once N bytes have gone through them.
struct FaultBudget {
    bool on = false;
    std::atomic<int64_t> left{0};
    FaultBudget() {
        if (const char* v = std::getenv("TANDEM_FAULT_ENOSPC_AFTER")) {
            on = true;
            left = std::strtoll(v, nullptr, 10);
        }
    }
};
FaultBudget& fault_budget() {
    static FaultBudget b;
    return b;
}

std::string errno_text(int err) {
    if (err == ENOSPC) return "no space left on the device; free some space there or write elsewhere";
    if (err == EDQUOT) return "disk quota exceeded";
    return std::strerror(err);
}

// fsync of a folder makes a rename durable. Some filesystems refuse fsync on folders (EINVAL); that is
// not a failure of the write itself, so only real I/O errors are reported.
void fsync_dir(const std::filesystem::path& dir, const std::filesystem::path& target) {
    int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0 && err == EIO)
        throw_io(target.string() + ": written, but syncing its folder failed: " + std::strerror(err));
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::filesystem::path target) : target_(std::move(target)) {
    if (target_.filename().empty()) throw_io(target_.string() + ": not a file path");
    const auto dir = target_.parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
        throw_io(target_.string() + ": cannot write: folder " + dir.string() + " does not exist");
    // O_EXCL with a per-process counter: a leftover temp from a crashed run is never reused or truncated.
    for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
        const auto n = g_temp_counter.fetch_add(1);
        std::string name = ".";  // appended piecewise: gcc 12 warns (-Wrestrict) on the "." + string form
        name += target_.filename().string();
        name += ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(n);
        temp_ = dir / name;
        do {
            fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        } while (fd_ < 0 && errno == EINTR);
        if (fd_ < 0 && errno != EEXIST) {
            const int err = errno;
            throw_io(target_.string() + ": cannot create temporary file " + temp_.string() + ": " + errno_text(err));
        }
    }
    if (fd_ < 0) throw_io(target_.string() + ": cannot create a temporary file next to it");
    buffer_.resize(kBufferSize);
}

AtomicFileWriter::~AtomicFileWriter() {
    discard();
}

void AtomicFileWriter::discard() noexcept {
    if (done_) return;
    done_ = true;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    ::unlink(temp_.c_str());
}

void AtomicFileWriter::fail(const std::string& what, int err) {
    discard();
    throw_io(target_.string() + ": " + what + ": " + errno_text(err));
}

void AtomicFileWriter::write_fd(const std::byte* data, size_t size) {
    if (FaultBudget& f = fault_budget(); f.on && (f.left -= int64_t(size)) < 0) fail("write failed", ENOSPC);
    while (size > 0) {
        const ssize_t n = ::write(fd_, data, size);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write failed", errno);
        }
        data += n;
        size -= static_cast<size_t>(n);
    }
}

void AtomicFileWriter::flush_buffer() {
    if (buffered_ == 0) return;
    write_fd(buffer_.data(), buffered_);
    buffered_ = 0;
}

void AtomicFileWriter::write(const void* data, size_t size) {
    if (done_) throw_internal(target_.string() + ": write after commit/discard");
    auto* p = static_cast<const std::byte*>(data);
    written_ += size;
    if (buffered_ + size <= buffer_.size()) {
        if (size) std::memcpy(buffer_.data() + buffered_, p, size);
        buffered_ += size;
        return;
    }
    flush_buffer();
    if (size >= buffer_.size()) {
        write_fd(p, size);
    } else {
        std::memcpy(buffer_.data(), p, size);
        buffered_ = size;
    }
}

void AtomicFileWriter::commit() {
    if (done_) throw_internal(target_.string() + ": commit after commit/discard");
    flush_buffer();
    if (::fsync(fd_) != 0) fail("fsync failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close failed", errno);
    if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("cannot rename the temporary file over it", errno);
    done_ = true;  // the temporary no longer exists under its own name
    fsync_dir(target_.parent_path(), target_);
}

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes) {
    AtomicFileWriter w(path);
    w.write(bytes);
    w.commit();
}

void write_file_atomic(const std::filesystem::path& path, std::span<const std::byte> bytes) {
    AtomicFileWriter w(path);
    w.write(bytes);
    w.commit();
}

}  // namespace tandem
