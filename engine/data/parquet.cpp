// SPDX-FileCopyrightText: 2026 The Tandem developers
// SPDX-License-Identifier: GPL-3.0-or-later
// Parquet reader (see parquet.h for the subset and the decisions). Layout of this file: a bounded byte cursor,
// the Thrift compact protocol, the footer structs, decompression, level / value decoding, then the Dremel
// assembly of rows from the leaf columns.
// Level assembly: each leaf column yields (repetition level, definition level, value?) triples. For a leaf we
// walk its path from the top-level field down; a definition level below a node's own level means that node is
// null (optional) or an empty list (repeated) and the walk stops; a repetition level r starts a new element
// of the repeated ancestor at depth r (r = 0: a new row). Leaves of one struct write into the same objects,
// so list<struct<role, content>> comes out as [{role, content}, ...].
#include "data/parquet.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include "tandem/error.h"

namespace tandem::parquet {

using json = nlohmann::ordered_json;

namespace {

// What to tell the user after every refusal.
constexpr const char* kFix =
    ". If the file opens in pyarrow, re-save it with pyarrow.parquet.write_table(table, path, compression='zstd') "
    "or convert it to JSON Lines (datasets: ds.to_json('data.jsonl'))";

// Refusal with the file's location prefix.
[[noreturn]] void fail(const std::string& where, const std::string& what) {
    throw_invalid(where + ": " + what + kFix);
}

// ----- a bounded cursor over bytes ------------------------------------------------------------------------
struct Cursor {
    const uint8_t* p;
    const uint8_t* end;
    const std::string* where;  // for messages

    size_t left() const { return static_cast<size_t>(end - p); }
    void need(size_t n, const char* what) const {
        if (n > left()) fail(*where, std::string("truncated data: ") + what + " needs " + std::to_string(n) +
                                         " bytes but only " + std::to_string(left()) + " remain");
    }
    uint8_t byte() {
        need(1, "a byte");
        return *p++;
    }
    std::string_view take(size_t n, const char* what) {
        need(n, what);
        std::string_view s(reinterpret_cast<const char*>(p), n);
        p += n;
        return s;
    }
    uint64_t varint() {
        uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            const uint8_t b = byte();
            v |= static_cast<uint64_t>(b & 0x7F) << shift;
            if (!(b & 0x80)) return v;
        }
        fail(*where, "malformed variable-length integer");
    }
    int64_t zigzag() {
        const uint64_t v = varint();
        return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1);
    }
    uint32_t u32le() {
        need(4, "a 4-byte length");
        uint32_t v;
        std::memcpy(&v, p, 4);
        p += 4;
        return v;
    }
};

// ----- Thrift compact protocol ---------------------------------------------------------------------------
enum TType : uint8_t {
    kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6, kDouble = 7, kBinary = 8,
    kList = 9, kSet = 10, kMap = 11, kStruct = 12,
};

class Thrift {
   public:
    explicit Thrift(Cursor& c) : c_(c) {}

    // Reads the next field header of the current struct; false at its end. Sets id and type.
    bool field(int16_t& id, uint8_t& type) {
        const uint8_t b = c_.byte();
        type = b & 0x0F;
        if (type == kStop) return false;
        const int delta = b >> 4;
        if (delta) {
            id = static_cast<int16_t>(last_id_ + delta);
        } else {
            id = static_cast<int16_t>(c_.zigzag());
        }
        last_id_ = id;
        return true;
    }
    // Struct nesting: the field-id delta restarts inside each struct.
    int16_t enter() {
        if (++depth_ > 64) fail(*c_.where, "metadata nested more than 64 levels deep");
        const int16_t saved = last_id_;
        last_id_ = 0;
        return saved;
    }
    void leave(int16_t saved) {
        --depth_;
        last_id_ = saved;
    }
    int64_t integer(uint8_t type) {
        if (type == kByte) return static_cast<int8_t>(c_.byte());
        if (type != kI16 && type != kI32 && type != kI64) fail(*c_.where, "metadata field has the wrong type");
        return c_.zigzag();
    }
    int32_t i32(uint8_t type) {
        const int64_t v = integer(type);
        if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
            fail(*c_.where, "metadata integer out of range");
        return static_cast<int32_t>(v);
    }
    bool boolean(uint8_t type) {
        if (type == kTrue) return true;
        if (type == kFalse) return false;
        fail(*c_.where, "metadata field has the wrong type (expected a boolean)");
    }
    std::string_view binary(uint8_t type) {
        if (type != kBinary) fail(*c_.where, "metadata field has the wrong type (expected a string)");
        const uint64_t n = c_.varint();
        if (n > c_.left()) fail(*c_.where, "a metadata string claims " + std::to_string(n) + " bytes but only " +
                                               std::to_string(c_.left()) + " remain");
        return c_.take(static_cast<size_t>(n), "a string");
    }
    // A list whose elements must be structs.
    size_t struct_list(uint8_t type) {
        uint8_t elem;
        const size_t n = list(type, elem);
        if (n > 0 && elem != kStruct) fail(*c_.where, "malformed metadata (a list of structs holds another type)");
        return n;
    }
    // List header: element type and count (each element needs at least one byte, so the count is bounded).
    size_t list(uint8_t type, uint8_t& elem) {
        if (type != kList && type != kSet) fail(*c_.where, "metadata field has the wrong type (expected a list)");
        const uint8_t b = c_.byte();
        elem = b & 0x0F;
        uint64_t n = b >> 4;
        if (n == 15) n = c_.varint();
        if (n > c_.left()) fail(*c_.where, "a metadata list claims " + std::to_string(n) + " elements but only " +
                                               std::to_string(c_.left()) + " bytes remain");
        return static_cast<size_t>(n);
    }
    void skip(uint8_t type) {
        if (type == kList || type == kSet || type == kMap) {
            if (++depth_ > 64) fail(*c_.where, "metadata nested more than 64 levels deep");
            skip_container(type);
            --depth_;
            return;
        }
        switch (type) {
            case kTrue:
            case kFalse:
                return;
            case kByte:
                c_.byte();
                return;
            case kI16:
            case kI32:
            case kI64:
                c_.varint();
                return;
            case kDouble:
                c_.take(8, "a double");
                return;
            case kBinary:
                binary(type);
                return;
            case kStruct: {
                const int16_t saved = enter();
                int16_t id;
                uint8_t t;
                while (field(id, t)) skip(t);
                leave(saved);
                return;
            }
            default:
                fail(*c_.where, "malformed metadata (unknown Thrift type " + std::to_string(type) + ")");
        }
    }
    void skip_container(uint8_t type) {
        switch (type) {
            case kList:
            case kSet: {
                uint8_t elem;
                const size_t n = list(type, elem);
                for (size_t i = 0; i < n; ++i) skip_element(elem);
                return;
            }
            case kMap: {
                const uint64_t n = c_.varint();
                if (n == 0) return;
                if (n > c_.left()) fail(*c_.where, "a metadata map claims too many entries");
                const uint8_t kv = c_.byte();
                for (uint64_t i = 0; i < n; ++i) {
                    skip_element(kv >> 4);
                    skip_element(kv & 0x0F);
                }
                return;
            }
            default:
                return;
        }
    }
    // Inside lists, booleans are one byte each.
    void skip_element(uint8_t type) {
        if (type == kTrue || type == kFalse) {
            c_.byte();
            return;
        }
        skip(type);
    }
    // Reads a struct: fn(id, type) for each field; fn must consume the field (or call skip).
    template <class Fn>
    void read_struct(Fn&& fn) {
        const int16_t saved = enter();
        int16_t id;
        uint8_t t;
        while (field(id, t)) fn(id, t);
        leave(saved);
    }
    Cursor& cursor() { return c_; }

   private:
    Cursor& c_;
    int16_t last_id_ = 0;
    int depth_ = 0;
};

// ----- the footer ------------------------------------------------------------------------------------------
enum PhysicalType { kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDoubleT = 5, kByteArray = 6,
                    kFixedLenByteArray = 7 };
enum Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum Codec { kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6, kLz4Raw = 7 };
enum Encoding { kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5,
                kDeltaLengthByteArray = 6, kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9 };
enum PageType { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
constexpr int kConvertedList = 3;
constexpr int kConvertedMap = 1;

const char* type_name(int t) {
    switch (t) {
        case kBoolean: return "BOOLEAN";
        case kInt32: return "INT32";
        case kInt64: return "INT64";
        case kInt96: return "INT96";
        case kFloat: return "FLOAT";
        case kDoubleT: return "DOUBLE";
        case kByteArray: return "BYTE_ARRAY";
        case kFixedLenByteArray: return "FIXED_LEN_BYTE_ARRAY";
    }
    return "an unknown type";
}

std::string codec_name(int c) {
    switch (c) {
        case kUncompressed: return "UNCOMPRESSED";
        case kSnappy: return "SNAPPY";
        case kGzip: return "GZIP";
        case kLzo: return "LZO";
        case kBrotli: return "BROTLI";
        case kLz4: return "LZ4";
        case kZstd: return "ZSTD";
        case kLz4Raw: return "LZ4_RAW";
    }
    return "codec number " + std::to_string(c);
}

std::string encoding_name(int e) {
    switch (e) {
        case kPlain: return "PLAIN";
        case kPlainDictionary: return "PLAIN_DICTIONARY";
        case kRle: return "RLE";
        case kBitPacked: return "BIT_PACKED";
        case kDeltaBinaryPacked: return "DELTA_BINARY_PACKED";
        case kDeltaLengthByteArray: return "DELTA_LENGTH_BYTE_ARRAY";
        case kDeltaByteArray: return "DELTA_BYTE_ARRAY";
        case kRleDictionary: return "RLE_DICTIONARY";
        case kByteStreamSplit: return "BYTE_STREAM_SPLIT";
    }
    return "encoding number " + std::to_string(e);
}

struct SchemaElement {
    int type = -1;  // PhysicalType; -1 for groups
    int type_length = 0;
    int repetition = kRequired;
    std::string name;
    int num_children = 0;
    int converted_type = -1;
    bool logical_list = false;
    bool logical_map = false;
};

struct ColumnMeta {
    int type = -1;
    std::vector<std::string> path;
    int codec = 0;
    int64_t num_values = 0;
    int64_t total_compressed_size = 0;
    int64_t data_page_offset = -1;
    int64_t dictionary_page_offset = -1;
    bool has_meta = false;
    bool external = false;  // file_path set: the data lives in another file
};

struct RowGroup {
    std::vector<ColumnMeta> columns;
    int64_t num_rows = 0;
    int64_t total_byte_size = 0;
};

// A node of the schema tree (SchemaElement with children and its levels).
struct Node {
    SchemaElement el;
    std::vector<int> children;  // indices into nodes
    int parent = -1;
    int def = 0;  // definition level at which this node is present
    int rep = 0;  // repetition level of this node (number of repeated nodes on the path, itself included)
    bool is_list = false;      // LIST/MAP-annotated group: JSON array, its repeated child gives the elements
    bool transparent = false;  // the repeated wrapper of a 3-level list: adds no JSON key
};

// A leaf column: its node path (top-level field first) and max levels.
struct Leaf {
    std::vector<int> path;  // node indices, root excluded
    int max_def = 0;
    int max_rep = 0;
    int type = -1;
    std::string dotted;  // "messages.list.element.role"
    int top = -1;        // index of the top-level field among root's children
};

SchemaElement read_schema_element(Thrift& t) {
    SchemaElement s;
    t.read_struct([&](int16_t id, uint8_t ty) {
        switch (id) {
            case 1: s.type = t.i32(ty); break;
            case 2: s.type_length = t.i32(ty); break;
            case 3: s.repetition = t.i32(ty); break;
            case 4: s.name = std::string(t.binary(ty)); break;
            case 5: s.num_children = t.i32(ty); break;
            case 6: s.converted_type = t.i32(ty); break;
            case 10:  // LogicalType, a union: 2 = MAP, 3 = LIST
                if (ty != kStruct) {
                    t.skip(ty);
                    break;
                }
                t.read_struct([&](int16_t lid, uint8_t lty) {
                    if (lid == 2) s.logical_map = true;
                    if (lid == 3) s.logical_list = true;
                    t.skip(lty);
                });
                break;
            default: t.skip(ty);
        }
    });
    return s;
}

ColumnMeta read_column_meta(Thrift& t) {
    ColumnMeta m;
    m.has_meta = true;
    t.read_struct([&](int16_t id, uint8_t ty) {
        switch (id) {
            case 1: m.type = t.i32(ty); break;
            case 3: {
                uint8_t e;
                const size_t n = t.list(ty, e);
                for (size_t i = 0; i < n; ++i) m.path.emplace_back(t.binary(e));
                break;
            }
            case 4: m.codec = t.i32(ty); break;
            case 5: m.num_values = t.integer(ty); break;
            case 7: m.total_compressed_size = t.integer(ty); break;
            case 9: m.data_page_offset = t.integer(ty); break;
            case 11: m.dictionary_page_offset = t.integer(ty); break;
            default: t.skip(ty);
        }
    });
    return m;
}

ColumnMeta read_column_chunk(Thrift& t) {
    ColumnMeta m;
    t.read_struct([&](int16_t id, uint8_t ty) {
        if (id == 1) {
            m.external = !t.binary(ty).empty();
        } else if (id == 3 && ty == kStruct) {
            const bool ext = m.external;
            m = read_column_meta(t);
            m.external = ext;
        } else {
            t.skip(ty);
        }
    });
    return m;
}

RowGroup read_row_group(Thrift& t) {
    RowGroup g;
    t.read_struct([&](int16_t id, uint8_t ty) {
        switch (id) {
            case 1: {
                const size_t n = t.struct_list(ty);
                for (size_t i = 0; i < n; ++i) g.columns.push_back(read_column_chunk(t));
                break;
            }
            case 2: g.total_byte_size = t.integer(ty); break;
            case 3: g.num_rows = t.integer(ty); break;
            default: t.skip(ty);
        }
    });
    return g;
}

struct PageHeader {
    int type = -1;
    int64_t uncompressed = -1;
    int64_t compressed = -1;
    int32_t num_values = -1;
    int encoding = -1;
    int def_encoding = kRle;
    int rep_encoding = kRle;
    // v2 only
    int32_t num_nulls = 0;
    int32_t def_bytes = 0;
    int32_t rep_bytes = 0;
    bool v2_compressed = true;
};

PageHeader read_page_header(Thrift& t) {
    PageHeader h;
    t.read_struct([&](int16_t id, uint8_t ty) {
        switch (id) {
            case 1: h.type = t.i32(ty); break;
            case 2: h.uncompressed = t.i32(ty); break;
            case 3: h.compressed = t.i32(ty); break;
            case 5:  // DataPageHeader
                if (ty != kStruct) fail(*t.cursor().where, "malformed page header");
                t.read_struct([&](int16_t d, uint8_t dt) {
                    if (d == 1) h.num_values = t.i32(dt);
                    else if (d == 2) h.encoding = t.i32(dt);
                    else if (d == 3) h.def_encoding = t.i32(dt);
                    else if (d == 4) h.rep_encoding = t.i32(dt);
                    else t.skip(dt);
                });
                break;
            case 7:  // DictionaryPageHeader
                if (ty != kStruct) fail(*t.cursor().where, "malformed page header");
                t.read_struct([&](int16_t d, uint8_t dt) {
                    if (d == 1) h.num_values = t.i32(dt);
                    else if (d == 2) h.encoding = t.i32(dt);
                    else t.skip(dt);
                });
                break;
            case 8:  // DataPageHeaderV2
                if (ty != kStruct) fail(*t.cursor().where, "malformed page header");
                t.read_struct([&](int16_t d, uint8_t dt) {
                    switch (d) {
                        case 1: h.num_values = t.i32(dt); break;
                        case 2: h.num_nulls = t.i32(dt); break;
                        case 4: h.encoding = t.i32(dt); break;
                        case 5: h.def_bytes = t.i32(dt); break;
                        case 6: h.rep_bytes = t.i32(dt); break;
                        case 7: h.v2_compressed = t.boolean(dt); break;
                        default: t.skip(dt);
                    }
                });
                break;
            default: t.skip(ty);
        }
    });
    return h;
}

// ----- decompression -----------------------------------------------------------------------------------------
// Decompressed sizes are declared by the page header; beyond 64 MiB they must be plausible for the compressed
// size (deflate cannot expand more than ~1032x), so a tiny lying file cannot make us allocate gigabytes.
void check_expansion(int64_t compressed, int64_t uncompressed, const std::string& where) {
    constexpr int64_t kFree = int64_t(64) << 20;
    if (uncompressed > kFree && uncompressed / 1100 > compressed)
        fail(where, "the page header declares " + std::to_string(uncompressed) + " decompressed bytes for " +
                        std::to_string(compressed) + " compressed ones, more than any codec can expand: the file "
                        "is corrupt");
}

std::string decompress(int codec, std::string_view in, int64_t out_size, const std::string& where) {
    if (codec == kUncompressed) {
        if (static_cast<int64_t>(in.size()) != out_size)
            fail(where, "an uncompressed page of " + std::to_string(in.size()) + " bytes declares " +
                            std::to_string(out_size) + " bytes");
        return std::string(in);
    }
    check_expansion(static_cast<int64_t>(in.size()), out_size, where);
    std::string out;
    switch (codec) {
        case kSnappy: {
            size_t n = 0;
            if (!snappy::GetUncompressedLength(in.data(), in.size(), &n) || static_cast<int64_t>(n) != out_size)
                fail(where, "the SNAPPY data is corrupt (its length does not match the page header)");
            out.resize(n);
            if (!snappy::RawUncompress(in.data(), in.size(), out.data()))
                fail(where, "the SNAPPY data is corrupt");
            return out;
        }
        case kZstd: {
            const unsigned long long n = ZSTD_getFrameContentSize(in.data(), in.size());
            if (n == ZSTD_CONTENTSIZE_ERROR) fail(where, "the ZSTD data is corrupt");
            if (n != ZSTD_CONTENTSIZE_UNKNOWN && n != static_cast<unsigned long long>(out_size))
                fail(where, "the ZSTD data's size does not match the page header");
            out.resize(static_cast<size_t>(out_size));
            const size_t r = ZSTD_decompress(out.data(), out.size(), in.data(), in.size());
            if (ZSTD_isError(r) || r != out.size())
                fail(where, std::string("the ZSTD data is corrupt (") +
                                (ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short output") + ")");
            return out;
        }
        case kGzip: {
            out.resize(static_cast<size_t>(out_size));
            z_stream z{};
            if (inflateInit2(&z, 15 + 32) != Z_OK) throw_internal("zlib: inflateInit2 failed");
            z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
            z.avail_in = static_cast<uInt>(in.size());
            z.next_out = reinterpret_cast<Bytef*>(out.data());
            z.avail_out = static_cast<uInt>(out.size());
            const int r = inflate(&z, Z_FINISH);
            const size_t produced = out.size() - z.avail_out;
            inflateEnd(&z);
            if (r != Z_STREAM_END || produced != out.size())
                fail(where, "the GZIP data is corrupt or its size does not match the page header");
            return out;
        }
        default:
            fail(where, "compression codec " + codec_name(codec) +
                            " is not supported (Tandem reads UNCOMPRESSED, SNAPPY, GZIP and ZSTD)");
    }
}

// ----- levels and values ------------------------------------------------------------------------------------
int bit_width(int max_level) {
    int w = 0;
    while ((1 << w) <= max_level) ++w;
    return w;
}

// RLE / bit-packed hybrid: appends exactly `count` values of `width` bits (width <= 32).
void decode_hybrid(Cursor c, int width, size_t count, std::vector<uint32_t>& out, const std::string& where) {
    const size_t start = out.size();
    const size_t value_bytes = static_cast<size_t>((width + 7) / 8);
    while (out.size() - start < count) {
        if (c.left() == 0) fail(where, "the RLE data ends before all " + std::to_string(count) + " values");
        const uint64_t header = c.varint();
        if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
            const uint64_t groups = header >> 1;
            if (groups == 0 || groups > c.left()) fail(where, "a bit-packed run is longer than the data");
            const size_t bytes = static_cast<size_t>(groups) * static_cast<size_t>(width);
            const std::string_view d = c.take(bytes, "a bit-packed run");
            const size_t n = static_cast<size_t>(groups) * 8;
            for (size_t k = 0; k < n && out.size() - start < count; ++k) {
                uint64_t v = 0;
                const size_t bit = k * static_cast<size_t>(width);
                for (int b = 0; b < width; ++b) {
                    const size_t at = bit + static_cast<size_t>(b);
                    v |= static_cast<uint64_t>((static_cast<uint8_t>(d[at / 8]) >> (at % 8)) & 1) << b;
                }
                out.push_back(static_cast<uint32_t>(v));
            }
        } else {  // RLE run
            const uint64_t run = header >> 1;
            const std::string_view d = c.take(value_bytes, "an RLE value");
            uint32_t v = 0;
            for (size_t b = 0; b < value_bytes; ++b) v |= static_cast<uint32_t>(static_cast<uint8_t>(d[b])) << (8 * b);
            const size_t want = count - (out.size() - start);
            const size_t n = static_cast<size_t>(std::min<uint64_t>(run, want));
            if (run == 0) fail(where, "an RLE run of length 0");
            out.insert(out.end(), n, v);
        }
    }
}

// Context of one column chunk being read.
struct ChunkReader {
    const Leaf& leaf;
    const ColumnMeta& meta;
    std::string where;  // "PATH: row group G, column 'x.y'"
    std::vector<json> dictionary;
    bool has_dictionary = false;
    // Output triples.
    std::vector<uint32_t> reps, defs;
    std::vector<json> values;  // one per def == max_def
    uint64_t* decoded_bytes;   // string bytes materialized so far by the whole read
    uint64_t decoded_limit;

    // Dictionary values are copied per use: a small file could otherwise expand one huge value millions of times.
    void charge(size_t n, const std::string& at) {
        *decoded_bytes += n;
        if (*decoded_bytes > decoded_limit)
            fail(at, "the rows would take more than " + std::to_string(decoded_limit >> 20) +
                         " MiB once decoded (values repeated through the dictionary far more than a dataset of this "
                         "size holds); the file is corrupt, or split it into smaller files");
    }

    // PLAIN values of this column's type: exactly n of them.
    void plain(Cursor c, size_t n, std::vector<json>& out, const std::string& at) {
        // Every PLAIN value takes at least one bit (BOOLEAN) or byte: bound n before reserving.
        const size_t min_bits = leaf.type == kBoolean ? 1 : 8;
        if (n > c.left() * 8 / min_bits) fail(at, std::to_string(n) + " values cannot fit in " +
                                                      std::to_string(c.left()) + " bytes: the page is corrupt");
        out.reserve(out.size() + n);
        switch (leaf.type) {
            case kBoolean: {
                const std::string_view d = c.take((n + 7) / 8, "booleans");
                for (size_t k = 0; k < n; ++k) out.emplace_back(((static_cast<uint8_t>(d[k / 8]) >> (k % 8)) & 1) != 0);
                return;
            }
            case kInt32: {
                const std::string_view d = c.take(n * 4, "INT32 values");
                for (size_t k = 0; k < n; ++k) {
                    int32_t v;
                    std::memcpy(&v, d.data() + 4 * k, 4);
                    out.emplace_back(v);
                }
                return;
            }
            case kInt64: {
                const std::string_view d = c.take(n * 8, "INT64 values");
                for (size_t k = 0; k < n; ++k) {
                    int64_t v;
                    std::memcpy(&v, d.data() + 8 * k, 8);
                    out.emplace_back(v);
                }
                return;
            }
            case kFloat: {
                const std::string_view d = c.take(n * 4, "FLOAT values");
                for (size_t k = 0; k < n; ++k) {
                    float v;
                    std::memcpy(&v, d.data() + 4 * k, 4);
                    out.emplace_back(static_cast<double>(v));
                }
                return;
            }
            case kDoubleT: {
                const std::string_view d = c.take(n * 8, "DOUBLE values");
                for (size_t k = 0; k < n; ++k) {
                    double v;
                    std::memcpy(&v, d.data() + 8 * k, 8);
                    out.emplace_back(v);
                }
                return;
            }
            case kByteArray: {
                for (size_t k = 0; k < n; ++k) {
                    const uint32_t len = c.u32le();
                    if (len > c.left())
                        fail(at, "a string of " + std::to_string(len) + " bytes runs past the end of the page (" +
                                     std::to_string(c.left()) + " bytes remain)");
                    out.emplace_back(std::string(c.take(len, "a string")));
                }
                return;
            }
            default:
                fail(at, std::string("columns of type ") + type_name(leaf.type) +
                             " are not supported (Tandem reads BOOLEAN, INT32, INT64, FLOAT, DOUBLE and BYTE_ARRAY)");
        }
    }

    void read_dictionary(const PageHeader& h, std::string_view body, const std::string& at) {
        if (has_dictionary) fail(at, "a second dictionary page in one column chunk");
        if (h.encoding != kPlain && h.encoding != kPlainDictionary)
            fail(at, "dictionary page encoding " + encoding_name(h.encoding) + " is not supported");
        if (h.num_values < 0) fail(at, "negative dictionary size");
        Cursor c{reinterpret_cast<const uint8_t*>(body.data()), reinterpret_cast<const uint8_t*>(body.data()) + body.size(),
                 &at};
        plain(c, static_cast<size_t>(h.num_values), dictionary, at);
        has_dictionary = true;
    }

    // Levels + values of a data page (v1 or v2) whose bodies are already decompressed.
    void read_values(const PageHeader& h, Cursor c, size_t n, const std::string& at) {
        // Non-null values: definition level == max.
        size_t present = 0;
        const size_t first = defs.size() - n;
        for (size_t k = first; k < defs.size(); ++k) present += defs[k] == static_cast<uint32_t>(leaf.max_def);
        if (h.encoding == kPlain) {
            plain(c, present, values, at);
        } else if (h.encoding == kPlainDictionary || h.encoding == kRleDictionary) {
            if (!has_dictionary) fail(at, "a dictionary-encoded page but the column chunk has no dictionary page");
            if (present == 0) return;
            const int width = c.byte();
            if (width > 32) fail(at, "dictionary index width " + std::to_string(width) + " is larger than 32 bits");
            std::vector<uint32_t> idx;
            decode_hybrid(c, width, present, idx, at);
            values.reserve(values.size() + present);
            size_t bytes = 0;
            for (uint32_t i : idx) {
                if (i >= dictionary.size())
                    fail(at, "dictionary index " + std::to_string(i) + " is outside the dictionary of " +
                                 std::to_string(dictionary.size()) + " values");
                if (dictionary[i].is_string()) bytes += dictionary[i].get_ref<const std::string&>().size();
            }
            charge(bytes, at);  // before copying anything
            for (uint32_t i : idx) values.push_back(dictionary[i]);
        } else if (h.encoding == kRle && leaf.type == kBoolean) {
            const uint32_t len = c.u32le();
            Cursor r{c.p, c.p + std::min<size_t>(len, c.left()), c.where};
            if (len > c.left()) fail(at, "the boolean RLE data runs past the end of the page");
            std::vector<uint32_t> bits;
            decode_hybrid(r, 1, present, bits, at);
            for (uint32_t b : bits) values.emplace_back(b != 0);
        } else {
            fail(at, "value encoding " + encoding_name(h.encoding) + " is not supported for a " +
                         type_name(leaf.type) +
                         " column (Tandem reads PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY and RLE booleans)");
        }
    }

    // Levels encoded RLE, with (v1) or without (v2) a 4-byte length prefix; `n` values appended to out.
    void levels(Cursor& c, int max_level, size_t n, bool prefixed, size_t v2_len, std::vector<uint32_t>& out,
                const std::string& at, const char* what) {
        if (max_level == 0) {
            out.insert(out.end(), n, 0);
            return;
        }
        size_t len = v2_len;
        if (prefixed) len = c.u32le();
        if (len > c.left())
            fail(at, std::string(what) + " levels claim " + std::to_string(len) + " bytes but only " +
                         std::to_string(c.left()) + " remain in the page");
        Cursor r{c.p, c.p + len, c.where};
        decode_hybrid(r, bit_width(max_level), n, out, at);
        for (size_t k = out.size() - n; k < out.size(); ++k)
            if (out[k] > static_cast<uint32_t>(max_level))
                fail(at, std::string(what) + " level " + std::to_string(out[k]) + " is above the column's maximum " +
                             std::to_string(max_level));
        c.p += len;
    }

    void read(std::string_view file, size_t data_end, int64_t rg_rows, int64_t rg_bytes) {
        if (meta.external) fail(where, "the column's data lives in another file (ColumnChunk.file_path)");
        int64_t start = meta.data_page_offset;
        if (meta.dictionary_page_offset > 0 && meta.dictionary_page_offset < start) start = meta.dictionary_page_offset;
        if (start < 4 || static_cast<size_t>(start) >= data_end)
            fail(where, "the column chunk starts at byte " + std::to_string(start) + ", outside the file's data (4.." +
                            std::to_string(data_end) + ")");
        const size_t chunk_end = data_end;  // total_compressed_size is advisory; pages are bounded by the data
        Cursor c{reinterpret_cast<const uint8_t*>(file.data()) + start,
                 reinterpret_cast<const uint8_t*>(file.data()) + chunk_end, &where};
        if (meta.num_values < 0) fail(where, "negative value count");
        // A value needs at least one level bit in some page; bound the count by the row group's rows for flat
        // columns and by what the column's bytes can encode for nested ones.
        (void)rg_bytes;
        const int64_t max_values = leaf.max_rep == 0 ? rg_rows : rg_rows + static_cast<int64_t>(data_end);
        if (meta.num_values > max_values)
            fail(where, "the column claims " + std::to_string(meta.num_values) + " values, more than its row group (" +
                            std::to_string(rg_rows) + " rows) can hold");
        size_t seen = 0;
        for (int page = 0; seen < static_cast<size_t>(meta.num_values); ++page) {
            const std::string at = where + ", page " + std::to_string(page);
            if (c.left() == 0) fail(at, "the column chunk ends after " + std::to_string(seen) + " of " +
                                            std::to_string(meta.num_values) + " values");
            Cursor hc{c.p, c.end, &at};
            Thrift t(hc);
            const PageHeader h = read_page_header(t);
            c.p = hc.p;
            if (h.compressed < 0 || h.uncompressed < 0)
                fail(at, "the page header lacks or has negative page sizes");
            if (static_cast<size_t>(h.compressed) > c.left())
                fail(at, "the page claims " + std::to_string(h.compressed) + " bytes but only " +
                             std::to_string(c.left()) + " remain before the footer");
            const std::string_view raw = c.take(static_cast<size_t>(h.compressed), "a page");
            if (h.type == kIndexPage) continue;
            if (h.type == kDictionaryPage) {
                read_dictionary(h, decompress(meta.codec, raw, h.uncompressed, at), at);
                continue;
            }
            if (h.type != kDataPage && h.type != kDataPageV2)
                fail(at, "unknown page type " + std::to_string(h.type));
            if (h.num_values < 0) fail(at, "negative value count in the page header");
            const size_t n = static_cast<size_t>(h.num_values);
            if (n > static_cast<size_t>(meta.num_values) - seen)
                fail(at, "the page holds " + std::to_string(n) + " values but the column chunk declares only " +
                             std::to_string(meta.num_values - static_cast<int64_t>(seen)) + " more");
            if (h.type == kDataPage) {
                if (leaf.max_rep > 0 && h.rep_encoding != kRle)
                    fail(at, "repetition level encoding " + encoding_name(h.rep_encoding) + " is not supported");
                if (leaf.max_def > 0 && h.def_encoding != kRle)
                    fail(at, "definition level encoding " + encoding_name(h.def_encoding) + " is not supported");
                const std::string body = decompress(meta.codec, raw, h.uncompressed, at);
                Cursor b{reinterpret_cast<const uint8_t*>(body.data()),
                         reinterpret_cast<const uint8_t*>(body.data()) + body.size(), &at};
                levels(b, leaf.max_rep, n, true, 0, reps, at, "repetition");
                levels(b, leaf.max_def, n, true, 0, defs, at, "definition");
                read_values(h, b, n, at);
            } else {
                if (h.rep_bytes < 0 || h.def_bytes < 0 ||
                    static_cast<int64_t>(h.rep_bytes) + h.def_bytes > static_cast<int64_t>(raw.size()) ||
                    static_cast<int64_t>(h.rep_bytes) + h.def_bytes > h.uncompressed)
                    fail(at, "the page's level lengths (" + std::to_string(h.rep_bytes) + " + " +
                                 std::to_string(h.def_bytes) + " bytes) exceed the page");
                Cursor b{reinterpret_cast<const uint8_t*>(raw.data()),
                         reinterpret_cast<const uint8_t*>(raw.data()) + raw.size(), &at};
                levels(b, leaf.max_rep, n, false, static_cast<size_t>(h.rep_bytes), reps, at, "repetition");
                if (leaf.max_rep == 0) b.p += h.rep_bytes;
                levels(b, leaf.max_def, n, false, static_cast<size_t>(h.def_bytes), defs, at, "definition");
                if (leaf.max_def == 0) b.p += h.def_bytes;
                const std::string_view vals(reinterpret_cast<const char*>(b.p), b.left());
                const int64_t vals_size = h.uncompressed - h.rep_bytes - h.def_bytes;
                const std::string body = h.v2_compressed ? decompress(meta.codec, vals, vals_size, at)
                                                         : decompress(kUncompressed, vals, vals_size, at);
                Cursor v{reinterpret_cast<const uint8_t*>(body.data()),
                         reinterpret_cast<const uint8_t*>(body.data()) + body.size(), &at};
                read_values(h, v, n, at);
            }
            seen += n;
        }
    }
};

}  // namespace

struct File::Impl {
    std::string_view bytes;
    std::string path;
    size_t data_end = 0;  // where the footer starts
    int64_t num_rows = 0;
    std::vector<Node> nodes;  // nodes[0] is the root
    std::vector<Leaf> leaves;
    std::vector<RowGroup> row_groups;

    void build_tree(const std::vector<SchemaElement>& els) {
        if (els.empty()) fail(path, "the footer's schema is empty");
        size_t next = 0;
        // Iterative pre-order construction with an explicit stack (no recursion on file-controlled depth).
        struct Frame { int node; int remaining; };
        nodes.push_back(Node{els[next++], {}, -1, 0, 0});
        if (nodes[0].el.num_children < 0) fail(path, "negative child count in the schema");
        std::vector<Frame> stack{{0, nodes[0].el.num_children}};
        while (!stack.empty()) {
            if (stack.back().remaining == 0) {
                stack.pop_back();
                continue;
            }
            --stack.back().remaining;
            if (next >= els.size()) fail(path, "the schema declares more columns than it lists");
            if (stack.size() > 100) fail(path, "the schema is nested more than 100 levels deep");
            const int parent = stack.back().node;
            Node n{els[next++], {}, parent, nodes[static_cast<size_t>(parent)].def,
                   nodes[static_cast<size_t>(parent)].rep};
            if (n.el.repetition == kOptional) ++n.def;
            else if (n.el.repetition == kRepeated) ++n.def, ++n.rep;
            else if (n.el.repetition != kRequired) fail(path, "unknown repetition type in the schema");
            if (n.el.num_children < 0) fail(path, "negative child count in the schema");
            const int idx = static_cast<int>(nodes.size());
            nodes.push_back(std::move(n));
            nodes[static_cast<size_t>(parent)].children.push_back(idx);
            if (nodes.back().el.num_children > 0) stack.push_back({idx, nodes.back().el.num_children});
        }
        if (next != els.size()) fail(path, "the schema lists more elements than its groups hold");
        // Lists: a LIST/MAP-annotated group whose single child is repeated.
        for (size_t i = 1; i < nodes.size(); ++i) {
            Node& n = nodes[i];
            const bool annotated = n.el.logical_list || n.el.logical_map || n.el.converted_type == kConvertedList ||
                                   n.el.converted_type == kConvertedMap;
            if (!annotated || n.el.type >= 0 || n.children.size() != 1) continue;
            Node& r = nodes[static_cast<size_t>(n.children[0])];
            if (r.el.repetition != kRepeated) continue;
            n.is_list = true;
            // 3-level list: the repeated group has one child, the element. (A repeated group with several
            // children, or a repeated leaf, is itself the element: the legacy 2-level form.)
            if (r.el.type < 0 && r.children.size() == 1 && !n.el.logical_map && n.el.converted_type != kConvertedMap)
                r.transparent = true;
        }
        // Leaves.
        for (size_t i = 1; i < nodes.size(); ++i) {
            if (!nodes[i].children.empty() || nodes[i].el.num_children > 0) continue;
            if (nodes[i].el.type < 0) fail(path, "schema element '" + nodes[i].el.name + "' has neither a type nor children");
            Leaf l;
            for (int k = static_cast<int>(i); k > 0; k = nodes[static_cast<size_t>(k)].parent) l.path.push_back(k);
            std::reverse(l.path.begin(), l.path.end());
            for (int k : l.path) l.dotted += (l.dotted.empty() ? "" : ".") + nodes[static_cast<size_t>(k)].el.name;
            l.max_def = nodes[i].def;
            l.max_rep = nodes[i].rep;
            l.type = nodes[i].el.type;
            const auto& top = nodes[0].children;
            l.top = static_cast<int>(std::find(top.begin(), top.end(), l.path[0]) - top.begin());
            leaves.push_back(std::move(l));
        }
    }

    void parse_footer() {
        if (bytes.size() < 12) fail(path, "not a Parquet file: " + std::to_string(bytes.size()) + " bytes is too short");
        if (!has_magic(bytes))
            fail(path, "not a Parquet file: the magic bytes \"PAR1\" are missing at the start or the end "
                       "(a truncated download?)");
        uint32_t len;
        std::memcpy(&len, bytes.data() + bytes.size() - 8, 4);
        if (len == 0 || len > bytes.size() - 12)
            fail(path, "truncated or corrupt footer: it claims " + std::to_string(len) + " bytes but the file has " +
                           std::to_string(bytes.size()) + " (was the download cut off?)");
        data_end = bytes.size() - 8 - len;
        const std::string where = path + ": footer";
        Cursor c{reinterpret_cast<const uint8_t*>(bytes.data()) + data_end,
                 reinterpret_cast<const uint8_t*>(bytes.data()) + bytes.size() - 8, &where};
        Thrift t(c);
        std::vector<SchemaElement> schema;
        bool has_rows = false;
        t.read_struct([&](int16_t id, uint8_t ty) {
            switch (id) {
                case 2: {
                    const size_t n = t.struct_list(ty);
                    for (size_t i = 0; i < n; ++i) schema.push_back(read_schema_element(t));
                    break;
                }
                case 3:
                    num_rows = t.integer(ty);
                    has_rows = true;
                    break;
                case 4: {
                    const size_t n = t.struct_list(ty);
                    for (size_t i = 0; i < n; ++i) row_groups.push_back(read_row_group(t));
                    break;
                }
                default: t.skip(ty);
            }
        });
        if (!has_rows || num_rows < 0) fail(where, "the footer lacks a valid row count");
        build_tree(schema);
        int64_t sum = 0;
        for (size_t g = 0; g < row_groups.size(); ++g) {
            const RowGroup& rg = row_groups[g];
            const std::string at = path + ": row group " + std::to_string(g);
            if (rg.num_rows < 0) fail(at, "negative row count");
            // Training rows hold text: at least one byte of data per row (across all columns) is expected, which
            // bounds what a lying row count can make us allocate.
            const int64_t bytes_bound = static_cast<int64_t>(data_end) + 4096;
            if (rg.num_rows > bytes_bound)
                fail(at, "claims " + std::to_string(rg.num_rows) + " rows, more than a " +
                             std::to_string(bytes.size()) + "-byte file can hold (Tandem expects at least one byte "
                             "of data per row)");
            sum += rg.num_rows;
            if (rg.columns.size() != leaves.size())
                fail(at, "has " + std::to_string(rg.columns.size()) + " column chunks but the schema has " +
                             std::to_string(leaves.size()) + " columns");
            for (size_t k = 0; k < leaves.size(); ++k) {
                const ColumnMeta& m = rg.columns[k];
                if (!m.has_meta) fail(at + ", column '" + leaves[k].dotted + "'", "the column chunk has no metadata");
                if (m.type != leaves[k].type)
                    fail(at + ", column '" + leaves[k].dotted + "'",
                         std::string("the column chunk's type ") + type_name(m.type) +
                             " differs from the schema's " + type_name(leaves[k].type));
            }
        }
        if (sum != num_rows)
            fail(where, "the row groups hold " + std::to_string(sum) + " rows but the footer says " +
                            std::to_string(num_rows));
    }

    // Writes one triple of a leaf into the row object.
    void place(const Leaf& leaf, json& row, const std::vector<size_t>& idx, uint32_t def, json* value) const {
        json* slot = &row[nodes[static_cast<size_t>(leaf.path[0])].el.name];
        for (size_t k = 0; k < leaf.path.size(); ++k) {
            const Node& n = nodes[static_cast<size_t>(leaf.path[k])];
            if (n.el.repetition == kOptional && def < static_cast<uint32_t>(n.def)) return;  // null stays null
            if (n.el.repetition == kRepeated) {
                const bool under_list = n.parent > 0 && nodes[static_cast<size_t>(n.parent)].is_list;
                if (!under_list) {
                    // A bare repeated field: it is its own array.
                    if (slot->is_null()) *slot = json::array();
                }
                if (!slot->is_array()) *slot = json::array();
                if (def < static_cast<uint32_t>(n.def)) return;  // empty list
                const size_t i = idx[static_cast<size_t>(n.rep)];
                while (slot->size() <= i) slot->push_back(nullptr);
                slot = &(*slot)[i];
                if (n.transparent) continue;  // its single child is the element, in the same slot
            }
            if (k + 1 == leaf.path.size()) {
                if (value) *slot = std::move(*value);
                return;
            }
            if (n.is_list) continue;  // the repeated child indexes into this slot
            // A struct: the next node is a key of it.
            if (!slot->is_object()) *slot = json::object();
            slot = &(*slot)[nodes[static_cast<size_t>(leaf.path[k + 1])].el.name];
        }
    }
};

bool has_magic(std::string_view b) noexcept {
    return b.size() >= 8 && b.compare(0, 4, "PAR1") == 0 && b.compare(b.size() - 4, 4, "PAR1") == 0;
}

File::File(std::string_view bytes, std::string path) : impl_(std::make_unique<Impl>()) {
    impl_->bytes = bytes;
    impl_->path = std::move(path);
    impl_->parse_footer();
}
File::~File() = default;
File::File(File&&) noexcept = default;
File& File::operator=(File&&) noexcept = default;

std::vector<std::string> File::fields() const {
    std::vector<std::string> out;
    for (int c : impl_->nodes[0].children) out.push_back(impl_->nodes[static_cast<size_t>(c)].el.name);
    return out;
}
int64_t File::num_rows() const { return impl_->num_rows; }
size_t File::num_row_groups() const { return impl_->row_groups.size(); }

std::vector<json> File::read_rows(const std::vector<std::string>& fields) const {
    const Impl& m = *impl_;
    std::vector<json> rows;
    uint64_t decoded = 0;
    const uint64_t decoded_limit = std::max<uint64_t>(uint64_t(1) << 30, uint64_t(64) * m.bytes.size());
    const auto wanted = [&](const Leaf& l) {
        if (fields.empty()) return true;
        const std::string& name = m.nodes[static_cast<size_t>(l.path[0])].el.name;
        return std::find(fields.begin(), fields.end(), name) != fields.end();
    };
    for (size_t g = 0; g < m.row_groups.size(); ++g) {
        const RowGroup& rg = m.row_groups[g];
        const size_t base = rows.size();
        rows.resize(base + static_cast<size_t>(rg.num_rows), json::object());
        // Top-level fields in schema order: one pass per leaf, leaves are in schema order already.
        for (size_t k = 0; k < m.leaves.size(); ++k) {
            const Leaf& leaf = m.leaves[k];
            if (!wanted(leaf)) continue;
            ChunkReader r{leaf,  rg.columns[k],
                          m.path + ": row group " + std::to_string(g) + ", column '" + leaf.dotted + "'",
                          {},    false, {}, {}, {}, &decoded, decoded_limit};
            r.read(m.bytes, m.data_end, rg.num_rows, rg.total_byte_size);
            if (r.reps.size() != r.defs.size()) throw_internal("parquet: level counts differ");
            std::vector<size_t> idx(static_cast<size_t>(leaf.max_rep) + 1, 0);
            int64_t row = -1;
            size_t v = 0;
            for (size_t t = 0; t < r.defs.size(); ++t) {
                const uint32_t rep = r.reps[t];
                if (rep == 0) {
                    ++row;
                    if (row >= rg.num_rows)
                        fail(r.where, "the column holds more rows than its row group's " + std::to_string(rg.num_rows));
                    std::fill(idx.begin(), idx.end(), 0);
                } else {
                    if (row < 0) fail(r.where, "the first value continues a list (repetition level above 0)");
                    ++idx[rep];
                    std::fill(idx.begin() + rep + 1, idx.end(), 0);
                }
                json* value = nullptr;
                if (r.defs[t] == static_cast<uint32_t>(leaf.max_def)) {
                    if (v >= r.values.size()) throw_internal("parquet: fewer values than levels");
                    value = &r.values[v++];
                }
                m.place(leaf, rows[base + static_cast<size_t>(row)], idx, r.defs[t], value);
            }
            if (row + 1 != rg.num_rows)
                fail(r.where, "the column holds " + std::to_string(row + 1) + " rows but its row group has " +
                                  std::to_string(rg.num_rows));
        }
    }
    return rows;
}

}  // namespace tandem::parquet
