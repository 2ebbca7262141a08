// SplitMix64: the deterministic generator behind LoRA initialisation and sampling. Chosen over <random>
// distributions, whose output differs between standard libraries; this one is the same everywhere.
#pragma once

#include <cstdint>

namespace tandem {

class SplitMix64 {
public:
    explicit SplitMix64(uint64_t seed) : state_(seed) {}
    uint64_t next_u64() {
        uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    double next_double() { return double(next_u64() >> 11) * 0x1.0p-53; }  // [0, 1)

private:
    uint64_t state_;
};

}  // namespace tandem
