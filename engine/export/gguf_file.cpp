// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// The GGUF v3 container: header serialisation, the streamed writer and the validating reader (gguf_file.h).
#include "export/gguf_file.h"

#include <algorithm>
#include <cstring>
#include <fstream>

#include "tandem/error.h"

namespace tandem::gguf {

namespace {

template <class T>
void put(std::string& s, T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s.append(b, sizeof(T));
}
void put_str(std::string& s, const std::string& v) {
    put<uint64_t>(s, v.size());
    s += v;
}
uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace

void GgufHeader::key(const std::string& k, ValueType t) {
    put_str(kv_, k);
    put<uint32_t>(kv_, uint32_t(t));
    ++kv_count_;
}
void GgufHeader::add_u32(const std::string& k, uint32_t v) { key(k, ValueType::U32), put(kv_, v); }
void GgufHeader::add_i32(const std::string& k, int32_t v) { key(k, ValueType::I32), put(kv_, v); }
void GgufHeader::add_f32(const std::string& k, float v) { key(k, ValueType::F32), put(kv_, v); }
void GgufHeader::add_bool(const std::string& k, bool v) { key(k, ValueType::BOOL), put<uint8_t>(kv_, v ? 1 : 0); }
void GgufHeader::add_string(const std::string& k, const std::string& v) { key(k, ValueType::STRING), put_str(kv_, v); }
void GgufHeader::add_strings(const std::string& k, const std::vector<std::string>& v) {
    key(k, ValueType::ARRAY);
    put<uint32_t>(kv_, uint32_t(ValueType::STRING));
    put<uint64_t>(kv_, v.size());
    for (const auto& s : v) put_str(kv_, s);
}
void GgufHeader::add_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, ValueType::ARRAY);
    put<uint32_t>(kv_, uint32_t(ValueType::F32));
    put<uint64_t>(kv_, v.size());
    for (float x : v) put(kv_, x);
}
void GgufHeader::add_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, ValueType::ARRAY);
    put<uint32_t>(kv_, uint32_t(ValueType::I32));
    put<uint64_t>(kv_, v.size());
    for (int32_t x : v) put(kv_, x);
}

size_t GgufHeader::add_tensor(const std::string& name, const std::vector<int64_t>& shape, GgmlType type) {
    if (shape.empty() || !gguf_type_fits(type, shape.back()))
        throw_internal("GGUF tensor " + name + ": rows of " + (shape.empty() ? "?" : std::to_string(shape.back())) +
                       " values cannot be stored as " + std::string(ggml_type_name(type)));
    uint64_t rows = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= uint64_t(shape[i]);
    Tensor t{name, shape, type, data_bytes_, rows * ggml_row_bytes(type, shape.back())};
    data_bytes_ = align_up(data_bytes_ + t.bytes, kAlignment);
    tensors_.push_back(std::move(t));
    return tensors_.size() - 1;
}

std::string GgufHeader::serialize() const {
    std::string s = "GGUF";
    put<uint32_t>(s, 3);
    put<uint64_t>(s, tensors_.size());
    put<uint64_t>(s, kv_count_);
    s += kv_;
    for (const Tensor& t : tensors_) {
        put_str(s, t.name);
        put<uint32_t>(s, uint32_t(t.shape.size()));
        for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) put<int64_t>(s, *it);
        put<uint32_t>(s, uint32_t(t.type));
        put<uint64_t>(s, t.offset);
    }
    return s;
}

uint64_t GgufHeader::file_size() const { return align_up(serialize().size(), kAlignment) + data_bytes_; }

GgufStreamWriter::GgufStreamWriter(const std::filesystem::path& path, const GgufHeader& header)
    : header_(header), out_(path) {
    const std::string h = header.serialize();
    raw(h.data(), h.size());
    pad();
}

void GgufStreamWriter::raw(const void* p, size_t n) {
    out_.write(p, n);
    pos_ += n;
}

void GgufStreamWriter::pad() {
    static const char zeros[kAlignment] = {};
    const uint64_t to = align_up(pos_, kAlignment);
    raw(zeros, size_t(to - pos_));
}

void GgufStreamWriter::write(std::span<const std::byte> bytes) {
    const auto& ts = header_.tensors();
    if (tensor_ >= ts.size() || in_tensor_ + bytes.size() > ts[tensor_].bytes)
        throw_internal("GGUF writer: more data than the header declares (" +
                       (tensor_ < ts.size() ? ts[tensor_].name : std::string("after the last tensor")) + ")");
    raw(bytes.data(), bytes.size());
    in_tensor_ += bytes.size();
    if (in_tensor_ == ts[tensor_].bytes) {
        pad();
        ++tensor_;
        in_tensor_ = 0;
    }
}

void GgufStreamWriter::finish() {
    if (tensor_ != header_.tensors().size())
        throw_internal("GGUF writer: tensor " + header_.tensors()[tensor_].name + " was not written");
    out_.commit();
}

// ---------------------------------------------------------------------------------------------------------------
// Reader

namespace {

constexpr uint64_t kMaxString = uint64_t(1) << 30;
constexpr uint64_t kMaxArray = uint64_t(1) << 28;
constexpr uint64_t kMaxTensors = uint64_t(1) << 20;
constexpr uint64_t kMaxKv = uint64_t(1) << 20;

struct Cursor {
    std::ifstream& in;
    const std::string& file;
    uint64_t size;
    uint64_t pos = 0;

    void bytes(void* p, uint64_t n) {
        if (n > size - pos) throw_invalid(file + ": truncated GGUF header at byte " + std::to_string(pos));
        in.read(static_cast<char*>(p), std::streamsize(n));
        if (!in) throw_io(file + ": read failed at byte " + std::to_string(pos));
        pos += n;
    }
    template <class T>
    T get() {
        T v;
        bytes(&v, sizeof(T));
        return v;
    }
    std::string str() {
        const auto n = get<uint64_t>();
        if (n > kMaxString || n > size - pos)
            throw_invalid(file + ": string of " + std::to_string(n) + " bytes at byte " + std::to_string(pos));
        std::string s(n, '\0');
        bytes(s.data(), n);
        return s;
    }
};

bool is_int(ValueType t) {
    return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
           t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64 ||
           t == ValueType::BOOL;
}

int64_t read_int(Cursor& c, ValueType t) {
    switch (t) {
    case ValueType::U8: return c.get<uint8_t>();
    case ValueType::I8: return c.get<int8_t>();
    case ValueType::U16: return c.get<uint16_t>();
    case ValueType::I16: return c.get<int16_t>();
    case ValueType::U32: return c.get<uint32_t>();
    case ValueType::I32: return c.get<int32_t>();
    case ValueType::U64: return int64_t(c.get<uint64_t>());
    case ValueType::I64: return c.get<int64_t>();
    case ValueType::BOOL: {
        const auto b = c.get<uint8_t>();
        if (b > 1) throw_invalid(c.file + ": bool value " + std::to_string(b) + " at byte " + std::to_string(c.pos));
        return b;
    }
    default: return 0;
    }
}

}  // namespace

const GgufValue* GgufFile::find(const std::string& key) const {
    const auto it = kv.find(key);
    return it == kv.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
    for (const auto& t : tensors)
        if (t.name == name) return &t;
    return nullptr;
}

GgufFile read_gguf(const std::filesystem::path& path) {
    const std::string file = path.string();
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(path, ec);
    if (ec) throw_io(file + ": cannot read: " + ec.message());
    std::ifstream in(path, std::ios::binary);
    if (!in) throw_io(file + ": cannot open");
    Cursor c{in, file, size};
    GgufFile g;
    g.file_size = size;
    char magic[4];
    c.bytes(magic, 4);
    if (std::memcmp(magic, "GGUF", 4) != 0) throw_invalid(file + ": not a GGUF file (bad magic)");
    g.version = c.get<uint32_t>();
    if (g.version != 2 && g.version != 3)
        throw_invalid(file + ": GGUF version " + std::to_string(g.version) + " (expected 2 or 3)");
    const auto n_tensors = c.get<uint64_t>(), n_kv = c.get<uint64_t>();
    if (n_tensors > kMaxTensors || n_kv > kMaxKv)
        throw_invalid(file + ": implausible counts (" + std::to_string(n_tensors) + " tensors, " +
                      std::to_string(n_kv) + " keys)");
    for (uint64_t k = 0; k < n_kv; ++k) {
        std::string key = c.str();
        if (g.kv.count(key)) throw_invalid(file + ": duplicate key " + key);
        GgufValue v;
        const auto t = c.get<uint32_t>();
        if (t > uint32_t(ValueType::F64)) throw_invalid(file + ": key " + key + " has value type " + std::to_string(t));
        v.type = ValueType(t);
        auto scalar = [&](ValueType vt, GgufValue& out) {
            if (is_int(vt)) out.i = read_int(c, vt);
            else if (vt == ValueType::F32) out.f = c.get<float>();
            else if (vt == ValueType::F64) out.f = c.get<double>();
            else if (vt == ValueType::STRING) out.s = c.str();
        };
        if (v.type == ValueType::ARRAY) {
            const auto at = c.get<uint32_t>();
            if (at > uint32_t(ValueType::F64) || at == uint32_t(ValueType::ARRAY))
                throw_invalid(file + ": key " + key + " is an array of type " + std::to_string(at));
            v.array_type = ValueType(at);
            v.count = c.get<uint64_t>();
            if (v.count > kMaxArray) throw_invalid(file + ": key " + key + " has " + std::to_string(v.count) + " elements");
            for (uint64_t i = 0; i < v.count; ++i) {
                GgufValue e;
                scalar(v.array_type, e);
                if (v.array_type == ValueType::STRING) v.ss.push_back(std::move(e.s));
                else if (is_int(v.array_type)) v.is.push_back(e.i);
                else v.fs.push_back(e.f);
            }
        } else {
            scalar(v.type, v);
        }
        g.key_order.push_back(key);
        g.kv.emplace(std::move(key), std::move(v));
    }
    if (const GgufValue* a = g.find("general.alignment")) {
        if (a->type != ValueType::U32 || a->i == 0 || (a->i & (a->i - 1)) != 0)
            throw_invalid(file + ": general.alignment must be a power of two (u32)");
        g.alignment = uint32_t(a->i);
    }
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensorInfo t;
        t.name = c.str();
        if (t.name.size() >= 64) throw_invalid(file + ": tensor name longer than 63 bytes: " + t.name);
        const auto nd = c.get<uint32_t>();
        if (nd == 0 || nd > 4) throw_invalid(file + ": tensor " + t.name + " has " + std::to_string(nd) + " dimensions");
        uint64_t numel = 1;
        for (uint32_t d = 0; d < nd; ++d) {
            const auto n = c.get<int64_t>();
            if (n <= 0 || n > (int64_t(1) << 40)) throw_invalid(file + ": tensor " + t.name + " has a bad dimension");
            t.ne.push_back(n);
            numel *= uint64_t(n);
            if (numel > (uint64_t(1) << 42)) throw_invalid(file + ": tensor " + t.name + " is implausibly large");
        }
        const auto type = c.get<uint32_t>();
        if (!ggml_type_known(type))
            throw_invalid(file + ": tensor " + t.name + " has ggml type " + std::to_string(type) +
                          ", which Tandem's reader does not know");
        t.type = GgmlType(type);
        if (!gguf_type_fits(t.type, t.ne[0]))
            throw_invalid(file + ": tensor " + t.name + ": a row of " + std::to_string(t.ne[0]) +
                          " values is not a whole number of " + std::string(ggml_type_name(t.type)) + " blocks");
        t.offset = c.get<uint64_t>();
        if (t.offset % g.alignment != 0) throw_invalid(file + ": tensor " + t.name + " is not aligned");
        t.bytes = numel / uint64_t(t.ne[0]) * ggml_row_bytes(t.type, t.ne[0]);
        if (g.tensor(t.name)) throw_invalid(file + ": duplicate tensor " + t.name);
        g.tensors.push_back(std::move(t));
    }
    g.data_offset = align_up(c.pos, g.alignment);
    if (g.data_offset > size) throw_invalid(file + ": no data section");
    std::vector<std::pair<uint64_t, uint64_t>> spans;
    for (const auto& t : g.tensors) {
        if (t.offset > size - g.data_offset || t.bytes > size - g.data_offset - t.offset)
            throw_invalid(file + ": tensor " + t.name + " extends past the end of the file");
        spans.push_back({t.offset, t.offset + t.bytes});
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i)
        if (spans[i].first < spans[i - 1].second) throw_invalid(file + ": tensors overlap");
    return g;
}

std::vector<float> GgufFile::read_f32(const std::filesystem::path& path, const std::string& name) const {
    const GgufTensorInfo* t = tensor(name);
    if (!t) throw_invalid(path.string() + ": no tensor named " + name);
    std::ifstream in(path, std::ios::binary);
    in.seekg(std::streamoff(data_offset + t->offset));
    std::vector<std::byte> bytes(t->bytes);
    in.read(reinterpret_cast<char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!in) throw_io(path.string() + ": cannot read tensor " + name);
    uint64_t numel = 1;
    for (auto n : t->ne) numel *= uint64_t(n);
    std::vector<float> out(numel);
    const uint64_t row = ggml_row_bytes(t->type, t->ne[0]);
    for (uint64_t r = 0; r < numel / uint64_t(t->ne[0]); ++r)
        dequantize_row(t->type, std::span(bytes).subspan(r * row, row),
                       std::span(out).subspan(r * uint64_t(t->ne[0]), uint64_t(t->ne[0])));
    return out;
}

}  // namespace tandem::gguf
