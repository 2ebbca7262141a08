// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// safetensors reader and writer (see tandem/safetensors.h for the format and the validation rules).
// The reader validates the whole header before any span is handed out: a file either opens with every
// tensor in bounds and the data section exactly covered, or throws Error{InvalidInput} naming the file.
#include "tandem/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/utf8.h"
#include "io/atomic_file.h"
#include "io/mapped_file.h"
#include "tandem/error.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; Tandem only runs on little-endian hosts");

namespace tandem {

namespace {

using json = nlohmann::json;

struct DTypeEntry {
    DType dtype;
    std::string_view name;
    size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::BOOL, "BOOL", 1},       {DType::U8, "U8", 1},   {DType::I8, "I8", 1},   {DType::F8_E5M2, "F8_E5M2", 1},
    {DType::F8_E4M3, "F8_E4M3", 1}, {DType::I16, "I16", 2}, {DType::U16, "U16", 2}, {DType::F16, "F16", 2},
    {DType::BF16, "BF16", 2},       {DType::I32, "I32", 4}, {DType::U32, "U32", 4}, {DType::F32, "F32", 4},
    {DType::F64, "F64", 8},         {DType::I64, "I64", 8}, {DType::U64, "U64", 8},
};

std::string known_dtypes() {
    std::string s;
    for (const auto& e : kDTypes) {
        if (!s.empty()) s += ", ";
        s += e.name;
    }
    return s;
}

// "'name'" with control characters made visible, so a hostile name cannot garble the message.
std::string qname(std::string_view s) {
    std::string out = "'";
    for (char c : s.substr(0, 200)) {
        if (static_cast<unsigned char>(c) < 0x20)
            out += '?';
        else
            out += c;
    }
    if (s.size() > 200) out += "...";
    return out + "'";
}

// JSON string escaping as serde_json does it: '"', '\\' and control characters; UTF-8 passes through.
void append_json_string(std::string& out, std::string_view s) {
    out += '"';
    for (char ch : s) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"':
                out += "\\\"";
                break;
            case '\\':
                out += "\\\\";
                break;
            case '\b':
                out += "\\b";
                break;
            case '\f':
                out += "\\f";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            case '\t':
                out += "\\t";
                break;
            default:
                if (c < 0x20) {
                    static const char hex[] = "0123456789abcdef";
                    out += "\\u00";
                    out += hex[c >> 4];
                    out += hex[c & 15];
                } else {
                    out += ch;
                }
        }
    }
    out += '"';
}

// Reads a JSON integer that must be >= 0 and fit int64. Returns false (and sets why) otherwise.
bool json_nonneg_int(const json& v, int64_t& out, std::string& why) {
    if (v.is_number_unsigned()) {
        const auto u = v.get<uint64_t>();
        if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            why = std::to_string(u) + " is too large";
            return false;
        }
        out = static_cast<int64_t>(u);
        return true;
    }
    if (v.is_number_integer()) {
        const auto i = v.get<int64_t>();
        if (i < 0) {
            why = std::to_string(i) + " is negative";
            return false;
        }
        out = i;
        return true;
    }
    why = std::string(v.type_name()) + " " + v.dump() + " is not an integer";
    return false;
}

}  // namespace

// --- dtypes and conversions -------------------------------------------------------------------------

std::string_view dtype_name(DType dtype) noexcept {
    for (const auto& e : kDTypes)
        if (e.dtype == dtype) return e.name;
    return "?";
}

std::optional<DType> parse_dtype(std::string_view name) noexcept {
    for (const auto& e : kDTypes)
        if (e.name == name) return e.dtype;
    return std::nullopt;
}

size_t dtype_size(DType dtype) noexcept {
    for (const auto& e : kDTypes)
        if (e.dtype == dtype) return e.size;
    return 0;
}

bool dtype_converts_to_f32(DType dtype) noexcept {
    return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16 || dtype == DType::F64;
}

int64_t TensorInfo::numel() const noexcept {
    int64_t n = 1;
    for (auto d : shape) n *= d;  // validated on open: no overflow
    return n;
}

std::string shape_to_string(std::span<const int64_t> shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) {
        if (i) s += ", ";
        s += std::to_string(shape[i]);
    }
    return s + "]";
}

float f16_to_f32(uint16_t h) noexcept {
    const uint32_t sign = uint32_t(h & 0x8000) << 16;
    const uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN (payload kept)
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
    } else if (mant == 0) {
        bits = sign;  // +-0
    } else {
        // Subnormal half: normalise. Value = mant * 2^-24.
        int e = -1;
        do {
            ++e;
            mant <<= 1;
        } while ((mant & 0x400) == 0);
        bits = sign | (uint32_t(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    return std::bit_cast<float>(bits);
}

float bf16_to_f32(uint16_t b) noexcept {
    return std::bit_cast<float>(uint32_t(b) << 16);
}

uint16_t f32_to_bf16(float f) noexcept {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
    const uint32_t rounding = 0x7fff + ((bits >> 16) & 1);
    return uint16_t((bits + rounding) >> 16);
}

uint16_t f32_to_f16(float f) noexcept {
    const uint32_t bits = std::bit_cast<uint32_t>(f);
    const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
    const uint32_t abs = bits & 0x7fffffffu;
    if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00 | ((abs >> 13) & 0x3ff));  // NaN stays NaN
    if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);                         // rounds to >= 65520 -> inf
    if (abs >= 0x38800000u) {                                                       // normal half (>= 2^-14)
        uint32_t m = abs + 0xfff + ((abs >> 13) & 1);                               // round to nearest even at bit 13
        return uint16_t(sign | ((m - 0x38000000u) >> 13));                          // rebias 127 -> 15
    }
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25) -> 0
    // Subnormal half: value = round(x * 2^24) units of 2^-24.
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffff) | 0x800000;  // 24-bit significand
    const uint32_t shift = 126 - exp;                   // x * 2^24 = mant >> (126 - exp) ... see below
    // x = mant * 2^(exp-150); x * 2^24 = mant * 2^(exp-126) = mant >> (126 - exp), shift in [14, 24].
    const uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    uint32_t r = q + ((rem > half || (rem == half && (q & 1))) ? 1 : 0);
    return uint16_t(sign | r);  // r == 0x400 carries into the smallest normal, which is correct
}

void tensor_to_f32(const TensorInfo& t, std::span<float> out) {
    const auto n = static_cast<size_t>(t.numel());
    if (out.size() != n)
        throw_internal("tensor_to_f32: tensor " + qname(t.name) + " has " + std::to_string(n) +
                       " elements, output buffer has " + std::to_string(out.size()));
    const std::byte* p = t.data.data();
    switch (t.dtype) {
        case DType::F32:
            if (n) std::memcpy(out.data(), p, n * 4);
            return;
        case DType::F16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = f16_to_f32(h);
            }
            return;
        case DType::BF16:
            for (size_t i = 0; i < n; ++i) {
                uint16_t h;
                std::memcpy(&h, p + 2 * i, 2);
                out[i] = bf16_to_f32(h);
            }
            return;
        case DType::F64:
            for (size_t i = 0; i < n; ++i) {
                double d;
                std::memcpy(&d, p + 8 * i, 8);
                out[i] = static_cast<float>(d);
            }
            return;
        default:
            throw_unsupported("tensor " + qname(t.name) + " has dtype " + std::string(dtype_name(t.dtype)) +
                              ", which cannot be converted to fp32 (only F32, F16, BF16, F64 can)");
    }
}

std::vector<float> tensor_to_f32(const TensorInfo& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    tensor_to_f32(t, out);
    return out;
}

// --- reader ------------------------------------------------------------------------------------------

struct SafetensorsFile::Impl {
    std::filesystem::path path;
    MappedFile map;
    std::vector<TensorInfo> tensors;  // sorted by data offset
    std::unordered_map<std::string, size_t> index;
    std::map<std::string, std::string> metadata;
    uint64_t header_size = 0;
    uint64_t data_size = 0;

    [[noreturn]] void bad(const std::string& what) const { throw_invalid(path.string() + ": " + what); }
    [[noreturn]] void bad_tensor(const std::string& name, const std::string& what) const {
        throw_invalid(path.string() + ": tensor " + qname(name) + ": " + what);
    }

    void parse();
    void parse_entry(const std::string& name, const json& entry);
};

void SafetensorsFile::Impl::parse() {
    const uint64_t file_size = map.size();
    if (file_size < 8)
        bad("not a safetensors file: " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
    uint64_t n = 0;
    std::memcpy(&n, map.data(), 8);
    if (n > kSafetensorsMaxHeader)
        bad("safetensors header length " + std::to_string(n) + " is above the limit of " +
            std::to_string(kSafetensorsMaxHeader) + " bytes (file is corrupt or not a safetensors file)");
    if (n > file_size - 8)
        bad("safetensors header length " + std::to_string(n) + " runs past the end of the file (" +
            std::to_string(file_size) + " bytes; the file is truncated or not a safetensors file)");
    if (n == 0) bad("safetensors header is empty (header length 0)");
    header_size = n;
    data_size = file_size - 8 - n;

    const auto* hdr = reinterpret_cast<const char*>(map.data() + 8);
    const std::string_view text(hdr, n);
    size_t bad_utf8 = 0;
    if (!utf8::is_valid(text, &bad_utf8))
        bad("safetensors header is not valid UTF-8 (byte " + std::to_string(bad_utf8) + " of the header)");

    // nlohmann's lexer stops at a NUL byte as if the input ended, so "{}\0garbage" would parse. A raw NUL
    // is never valid JSON (inside strings it must be escaped), and the reference library rejects it.
    if (const auto nul = text.find('\0'); nul != std::string_view::npos)
        bad("safetensors header contains a NUL byte at offset " + std::to_string(nul) +
            " (the header is JSON padded with spaces)");

    // Duplicate keys would silently drop a tensor in most JSON libraries; reject them.
    std::set<std::string> seen_keys;
    std::string duplicate;
    const json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
        if (event == json::parse_event_t::key && depth == 1 && parsed.is_string()) {
            if (!seen_keys.insert(parsed.get<std::string>()).second && duplicate.empty())
                duplicate = parsed.get<std::string>();
        }
        return true;
    };
    json header;
    try {
        header = json::parse(text.begin(), text.end(), cb);
    } catch (const json::exception& e) {  // parse_error, or out_of_range for a number beyond double (1e309)
        std::string what = e.what();
        if (auto p = what.find("parse error"); p != std::string::npos)
            what = what.substr(p);
        else if (auto q = what.find("] "); q != std::string::npos)
            what = what.substr(q + 2);
        bad("safetensors header is not valid JSON: " + what);
    }
    if (!header.is_object()) bad(std::string("safetensors header must be a JSON object, found ") + header.type_name());
    if (!duplicate.empty()) bad("safetensors header lists " + qname(duplicate) + " twice");

    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") {
            if (!it->is_object()) bad("__metadata__ must be an object of strings");
            for (auto m = it->begin(); m != it->end(); ++m) {
                if (!m->is_string())
                    bad("__metadata__ value for " + qname(m.key()) + " must be a string, found " + m->type_name());
                metadata[m.key()] = m->get<std::string>();
            }
            continue;
        }
        parse_entry(it.key(), *it);
    }

    // The reference library requires the tensors, sorted by offsets, to tile the data section exactly:
    // first at 0, each starting where the previous ended, the last ending at the end of the file.
    std::stable_sort(tensors.begin(), tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
        return a.data_begin != b.data_begin ? a.data_begin < b.data_begin : a.data_end < b.data_end;
    });
    uint64_t pos = 0;
    const TensorInfo* prev = nullptr;
    for (const auto& t : tensors) {
        if (t.data_begin < pos)
            bad("tensors " + qname(prev->name) + " [" + std::to_string(prev->data_begin) + ", " +
                std::to_string(prev->data_end) + ") and " + qname(t.name) + " [" + std::to_string(t.data_begin) + ", " +
                std::to_string(t.data_end) + ") overlap");
        if (t.data_begin > pos)
            bad("gap of " + std::to_string(t.data_begin - pos) + " bytes before tensor " + qname(t.name) +
                " (starts at " + std::to_string(t.data_begin) + ", previous data ends at " + std::to_string(pos) +
                "); safetensors requires tensors packed back to back, as the reference library does");
        pos = t.data_end;
        prev = &t;
    }
    if (pos != data_size)
        bad("data section is " + std::to_string(data_size) + " bytes but the tensors cover only " +
            std::to_string(pos) + " (" + std::to_string(data_size - pos) +
            " unexplained bytes at the end; the header does not describe this file)");

    const std::byte* data = map.data() + 8 + n;
    for (size_t i = 0; i < tensors.size(); ++i) {
        auto& t = tensors[i];
        t.data = {data + t.data_begin, static_cast<size_t>(t.data_end - t.data_begin)};
        index.emplace(t.name, i);
    }
}

void SafetensorsFile::Impl::parse_entry(const std::string& name, const json& e) {
    if (name.empty()) bad("safetensors header has a tensor with an empty name");
    if (!e.is_object()) bad_tensor(name, std::string("header entry must be an object, found ") + e.type_name());
    for (const char* key : {"dtype", "shape", "data_offsets"})
        if (!e.contains(key)) bad_tensor(name, std::string("header entry has no \"") + key + "\"");

    TensorInfo t;
    t.name = name;
    const auto& jd = e["dtype"];
    if (!jd.is_string()) bad_tensor(name, std::string("dtype must be a string, found ") + jd.type_name());
    const auto dtype = parse_dtype(jd.get<std::string>());
    if (!dtype) bad_tensor(name, "unknown dtype " + qname(jd.get<std::string>()) + " (known: " + known_dtypes() + ")");
    t.dtype = *dtype;

    const auto& js = e["shape"];
    if (!js.is_array()) bad_tensor(name, std::string("shape must be an array, found ") + js.type_name());
    uint64_t numel = 1;
    bool overflow = false;
    for (const auto& d : js) {
        int64_t v = 0;
        std::string why;
        if (!json_nonneg_int(d, v, why)) bad_tensor(name, "shape " + js.dump() + ": dimension " + why);
        t.shape.push_back(v);
        if (!overflow) overflow = __builtin_mul_overflow(numel, static_cast<uint64_t>(v), &numel);
    }
    uint64_t nbytes = 0;
    if (overflow || numel > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(numel, static_cast<uint64_t>(dtype_size(t.dtype)), &nbytes))
        bad_tensor(name, "shape " + js.dump() + " overflows: the element count does not fit in 64 bits");

    const auto& jo = e["data_offsets"];
    if (!jo.is_array() || jo.size() != 2)
        bad_tensor(name, "data_offsets must be an array of two integers, found " + jo.dump());
    int64_t begin = 0, end = 0;
    std::string why;
    if (!json_nonneg_int(jo[0], begin, why) || !json_nonneg_int(jo[1], end, why))
        bad_tensor(name, "data_offsets " + jo.dump() + ": " + why);
    if (begin > end) bad_tensor(name, "data_offsets " + jo.dump() + ": begin is after end");
    if (static_cast<uint64_t>(end) > data_size)
        bad_tensor(name, "data_offsets " + jo.dump() + " run past the end of the data section (" +
                             std::to_string(data_size) + " bytes); the file is truncated or corrupt");
    if (static_cast<uint64_t>(end - begin) != nbytes)
        bad_tensor(name, "shape " + shape_to_string(t.shape) + " of " + std::string(dtype_name(t.dtype)) + " needs " +
                             std::to_string(nbytes) + " bytes but data_offsets " + jo.dump() + " span " +
                             std::to_string(end - begin));
    t.data_begin = static_cast<uint64_t>(begin);
    t.data_end = static_cast<uint64_t>(end);
    tensors.push_back(std::move(t));
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : impl_(std::make_unique<Impl>()) {
    impl_->path = path;
    impl_->map = MappedFile(path);
    impl_->parse();
}
SafetensorsFile::~SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;

const std::filesystem::path& SafetensorsFile::path() const noexcept {
    return impl_->path;
}
const std::vector<TensorInfo>& SafetensorsFile::tensors() const noexcept {
    return impl_->tensors;
}
size_t SafetensorsFile::size() const noexcept {
    return impl_->tensors.size();
}
const std::map<std::string, std::string>& SafetensorsFile::metadata() const noexcept {
    return impl_->metadata;
}
uint64_t SafetensorsFile::file_size() const noexcept {
    return impl_->map.size();
}
uint64_t SafetensorsFile::header_size() const noexcept {
    return impl_->header_size;
}
uint64_t SafetensorsFile::data_size() const noexcept {
    return impl_->data_size;
}

std::vector<std::string> SafetensorsFile::names() const {
    std::vector<std::string> out;
    out.reserve(impl_->tensors.size());
    for (const auto& t : impl_->tensors) out.push_back(t.name);
    return out;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const noexcept {
    auto it = impl_->index.find(std::string(name));
    return it == impl_->index.end() ? nullptr : &impl_->tensors[it->second];
}

const TensorInfo& SafetensorsFile::at(std::string_view name) const {
    if (const auto* t = find(name)) return *t;
    throw_invalid(impl_->path.string() + ": no tensor named " + qname(name));
}

// --- sets of files (single, several, index + shards) ----------------------------------------------------

struct SafetensorsSet::Impl {
    std::vector<SafetensorsFile> files;
    std::filesystem::path index_path;
    std::map<std::string, std::pair<size_t, const TensorInfo*>, std::less<>> tensors;  // name -> (file, info)
};

SafetensorsSet::SafetensorsSet() : impl_(std::make_unique<Impl>()) {}
SafetensorsSet::~SafetensorsSet() = default;
SafetensorsSet::SafetensorsSet(SafetensorsSet&&) noexcept = default;
SafetensorsSet& SafetensorsSet::operator=(SafetensorsSet&&) noexcept = default;

SafetensorsSet SafetensorsSet::open_files(const std::vector<std::filesystem::path>& paths) {
    SafetensorsSet set;
    auto& im = *set.impl_;
    im.files.reserve(paths.size());
    for (const auto& p : paths) im.files.emplace_back(p);
    for (size_t f = 0; f < im.files.size(); ++f) {
        for (const auto& t : im.files[f].tensors()) {
            auto [it, inserted] = im.tensors.emplace(t.name, std::make_pair(f, &t));
            if (!inserted)
                throw_invalid(im.files[f].path().string() + ": tensor " + qname(t.name) + " is also in " +
                              im.files[it->second.first].path().string() +
                              "; without an index file each tensor must be in exactly one file");
        }
    }
    return set;
}

SafetensorsSet SafetensorsSet::open_index(const std::filesystem::path& index_json) {
    const std::string src = index_json.string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(index_json, ec)) throw_invalid(src + ": index file not found");
    // Indexes of large models are a few MB; 256 MB is far beyond any real one.
    const nlohmann::json j = read_json_file(index_json, size_t(256) << 20);
    if (!j.is_object()) throw_invalid(src + ": index must be a JSON object");
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
        throw_invalid(src + ": index has no \"weight_map\" object (tensor name -> shard file)");
    const auto dir = index_json.parent_path();

    // shard file name -> tensors the index puts there; each shard is mapped once.
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it->is_string())
            throw_invalid(src + ": weight_map entry for " + qname(it.key()) + " must be a file name string");
        const auto file = it->get<std::string>();
        const std::filesystem::path fp(file);
        // Shards live next to the index; anything else (absolute paths, "..", sub-folders) is refused so
        // an index cannot point the loader at arbitrary files.
        if (file.empty() || fp.is_absolute() || fp.has_parent_path() || file == "." || file == "..")
            throw_invalid(src + ": weight_map entry for " + qname(it.key()) + " names " + qname(file) +
                          ", expected a file name in the same folder");
        by_shard[file].push_back(it.key());
    }

    SafetensorsSet set;
    auto& im = *set.impl_;
    im.index_path = index_json;
    im.files.reserve(by_shard.size());
    for (const auto& [file, names] : by_shard) {
        const auto path = dir / file;
        if (!std::filesystem::is_regular_file(path, ec))
            throw_invalid(src + ": shard " + qname(file) + " (listed for " + std::to_string(names.size()) +
                          " tensors, e.g. " + qname(names.front()) + ") not found in " + dir.string() +
                          "; the download is incomplete");
        im.files.emplace_back(path);
        const size_t f = im.files.size() - 1;
        for (const auto& name : names) {
            const auto* t = im.files[f].find(name);
            if (!t)
                throw_invalid(src + ": tensor " + qname(name) + " is listed in weight_map for shard " + qname(file) +
                              ", but " + path.string() + " does not contain it");
            im.tensors.emplace(name, std::make_pair(f, t));
        }
    }
    return set;
}

SafetensorsSet SafetensorsSet::open(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        if (std::filesystem::is_regular_file(path / "model.safetensors.index.json", ec))
            return open_index(path / "model.safetensors.index.json");
        if (std::filesystem::is_regular_file(path / "model.safetensors", ec))
            return open_files({path / "model.safetensors"});
        throw_invalid(path.string() + ": no model.safetensors or model.safetensors.index.json in this folder");
    }
    const auto name = path.filename().string();
    if (name.size() > 5 && name.ends_with(".json")) return open_index(path);
    return open_files({path});
}

std::vector<std::string> SafetensorsSet::names() const {
    std::vector<std::string> out;
    out.reserve(impl_->tensors.size());
    for (const auto& [name, v] : impl_->tensors) out.push_back(name);
    return out;
}

size_t SafetensorsSet::size() const noexcept {
    return impl_->tensors.size();
}

const TensorInfo* SafetensorsSet::find(std::string_view name) const noexcept {
    auto it = impl_->tensors.find(name);
    return it == impl_->tensors.end() ? nullptr : it->second.second;
}

std::string SafetensorsSet::source_name() const {
    if (!impl_->index_path.empty()) return impl_->index_path.string();
    if (impl_->files.size() == 1) return impl_->files[0].path().string();
    if (impl_->files.empty()) return "(no safetensors files)";
    return impl_->files[0].path().parent_path().string() + " (" + std::to_string(impl_->files.size()) +
           " safetensors files)";
}

const TensorInfo& SafetensorsSet::at(std::string_view name) const {
    if (const auto* t = find(name)) return *t;
    throw_invalid(source_name() + ": no tensor named " + qname(name));
}

std::filesystem::path SafetensorsSet::file_of(std::string_view name) const {
    auto it = impl_->tensors.find(name);
    return it == impl_->tensors.end() ? std::filesystem::path() : impl_->files[it->second.first].path();
}

const std::vector<SafetensorsFile>& SafetensorsSet::files() const noexcept {
    return impl_->files;
}
const std::filesystem::path& SafetensorsSet::index_path() const noexcept {
    return impl_->index_path;
}

uint64_t SafetensorsSet::total_bytes() const noexcept {
    uint64_t n = 0;
    for (const auto& [name, v] : impl_->tensors) n += v.second->data.size();
    return n;
}

// --- writer -------------------------------------------------------------------------------------------

namespace {

// Validates the tensors and returns their write order plus the padded header (without the length prefix).
std::vector<const TensorToWrite*> plan_write(std::span<const TensorToWrite> tensors,
                                             const std::map<std::string, std::string>& metadata, std::string& header) {
    std::vector<const TensorToWrite*> order;
    std::set<std::string_view> names;
    for (const auto& t : tensors) {
        if (t.name.empty() || t.name == "__metadata__" || !utf8::is_valid(t.name))
            throw_internal("safetensors writer: invalid tensor name " + qname(t.name));
        if (!names.insert(t.name).second)
            throw_internal("safetensors writer: tensor " + qname(t.name) + " given twice");
        uint64_t numel = 1, nbytes = 0;
        for (auto d : t.shape) {
            if (d < 0 || __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel))
                throw_internal("safetensors writer: tensor " + qname(t.name) + " has invalid shape " +
                               shape_to_string(t.shape));
        }
        if (__builtin_mul_overflow(numel, dtype_size(t.dtype), &nbytes) || nbytes != t.data.size())
            throw_internal("safetensors writer: tensor " + qname(t.name) + " " + shape_to_string(t.shape) + " " +
                           std::string(dtype_name(t.dtype)) + " needs " + std::to_string(nbytes) + " bytes, got " +
                           std::to_string(t.data.size()));
        order.push_back(&t);
    }
    for (const auto& [k, v] : metadata)
        if (!utf8::is_valid(k) || !utf8::is_valid(v))
            throw_internal("safetensors writer: metadata " + qname(k) + " is not valid UTF-8");
    // The reference writer's order: dtype alignment descending, then name (byte order).
    std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
        if (a->dtype != b->dtype) return a->dtype > b->dtype;
        return a->name < b->name;
    });

    header = "{";
    bool first = true;
    if (!metadata.empty()) {
        header += "\"__metadata__\":{";
        bool mfirst = true;
        for (const auto& [k, v] : metadata) {
            if (!mfirst) header += ',';
            mfirst = false;
            append_json_string(header, k);
            header += ':';
            append_json_string(header, v);
        }
        header += '}';
        first = false;
    }
    uint64_t offset = 0;
    for (const auto* t : order) {
        if (!first) header += ',';
        first = false;
        append_json_string(header, t->name);
        header += ":{\"dtype\":\"";
        header += dtype_name(t->dtype);
        header += "\",\"shape\":[";
        for (size_t i = 0; i < t->shape.size(); ++i) {
            if (i) header += ',';
            header += std::to_string(t->shape[i]);
        }
        header += "],\"data_offsets\":[" + std::to_string(offset) + ",";
        offset += t->data.size();
        header += std::to_string(offset) + "]}";
    }
    header += '}';
    // Pad with spaces so the data section starts 8-byte aligned (the reference writer does the same).
    header.append((8 - header.size() % 8) % 8, ' ');
    if (header.size() > kSafetensorsMaxHeader)
        throw_internal("safetensors writer: header of " + std::to_string(header.size()) + " bytes is too large");
    return order;
}

std::string length_prefix(uint64_t n) {
    std::string s(8, '\0');
    std::memcpy(s.data(), &n, 8);
    return s;
}

}  // namespace

std::string serialize_safetensors(std::span<const TensorToWrite> tensors,
                                  const std::map<std::string, std::string>& metadata) {
    std::string header;
    const auto order = plan_write(tensors, metadata, header);
    std::string out = length_prefix(header.size()) + header;
    for (const auto* t : order) out.append(reinterpret_cast<const char*>(t->data.data()), t->data.size());
    return out;
}

void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                       const std::map<std::string, std::string>& metadata) {
    std::string header;
    const auto order = plan_write(tensors, metadata, header);
    AtomicFileWriter w(path);
    w.write(length_prefix(header.size()));
    w.write(header);
    for (const auto* t : order) w.write(t->data);
    w.commit();
}

}  // namespace tandem
