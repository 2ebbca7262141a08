// Thread count of the CPU backend: OpenMP (our loops) and OpenBLAS (GEMMs) together.
// Every CPU kernel gives bitwise-identical results for any thread count (see each file), so this only
// changes speed; the tests use it to prove exactly that.
#pragma once

namespace tandem::cpu {

int cpu_threads();                  // OpenMP's current maximum
void set_cpu_threads(int threads);  // >= 1; sets OpenMP and OpenBLAS

}  // namespace tandem::cpu
