// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// MappedFile: open + fstat + mmap(PROT_READ, MAP_PRIVATE), see mapped_file.h.
#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "tandem/error.h"

namespace tandem {

namespace {

// Closes a descriptor on every exit path of the constructor.
struct FdCloser {
    int fd = -1;
    ~FdCloser() {
        if (fd >= 0) ::close(fd);
    }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
    FdCloser fd;
    do {
        fd.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    } while (fd.fd < 0 && errno == EINTR);
    if (fd.fd < 0) {
        const int err = errno;
        if (err == ENOENT) throw_io(path.string() + ": file not found");
        throw_io(path.string() + ": cannot open: " + std::strerror(err));
    }
    struct stat st {};
    if (::fstat(fd.fd, &st) != 0) throw_io(path.string() + ": cannot stat: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw_io(path.string() + ": is a directory, expected a file");
    if (!S_ISREG(st.st_mode)) throw_io(path.string() + ": not a regular file");
    if (st.st_size == 0) return;  // mmap of length 0 is an error; an empty mapping is fine
    size_ = static_cast<size_t>(st.st_size);
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd.fd, 0);
    if (p == MAP_FAILED) {
        const int err = errno;
        size_ = 0;
        throw_io(path.string() + ": cannot memory-map (" + std::to_string(st.st_size) +
                 " bytes): " + std::strerror(err));
    }
    data_ = static_cast<std::byte*>(p);
}

MappedFile::~MappedFile() {
    release();
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)), data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        path_ = std::move(other.path_);
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void MappedFile::release() noexcept {
    if (data_) ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
}

void MappedFile::advise_sequential() const noexcept {
    if (data_) ::madvise(data_, size_, MADV_SEQUENTIAL);
}

void MappedFile::advise_willneed(size_t offset, size_t length) const noexcept {
    if (!data_ || offset >= size_) return;
    // madvise wants a page-aligned start.
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    const size_t start = offset / page * page;
    const size_t end = offset + std::min(length, size_ - offset);
    ::madvise(data_ + start, end - start, MADV_WILLNEED);
}

}  // namespace tandem
