// Oracle for tests/format_crosscheck.rs: CUTLASS's own Sm1xxBlockScaledConfig scale-factor layouts,
// evaluated on the host. Not generated: a test program.
//
// usage: sf_layout OUTPUT.bin
// For every case (SFVec, M, K, L) below, in order: the layout's cosize (u32), then the offset (u32)
// of every element coordinate (m, k, l), l outermost, then m, then k.
#include <cstdint>
#include <cstdio>

#include "cute/tensor.hpp"
#include "cutlass/detail/sm100_blockscaled_layout.hpp"

template <int SFVec>
void emit(std::FILE *out, int M, int K, int L) {
  using Config = cutlass::detail::Sm1xxBlockScaledConfig<SFVec>;
  auto layout = Config::tile_atom_to_shape_SFA(cute::make_shape(M, 1, K, L));
  uint32_t cos = uint32_t(cute::cosize(layout));
  std::fwrite(&cos, 4, 1, out);
  for (int l = 0; l < L; ++l)
    for (int m = 0; m < M; ++m)
      for (int k = 0; k < K; ++k) {
        uint32_t off = uint32_t(layout(cute::make_coord(m, k, l)));
        std::fwrite(&off, 4, 1, out);
      }
}

int main(int argc, char **argv) {
  if (argc != 2) { std::fprintf(stderr, "usage: %s OUTPUT.bin\n", argv[0]); return 2; }
  std::FILE *out = std::fopen(argv[1], "wb");
  if (!out) { std::perror("output"); return 1; }
  const int Ms[] = {1, 100, 128, 129, 300};
  const int Ks[] = {16, 48, 96, 200, 544};
  const int Ls[] = {1, 2};
  for (int vec : {16, 32, 64})
    for (int M : Ms)
      for (int K : Ks)
        for (int L : Ls) {
          if (vec == 16) emit<16>(out, M, K, L);
          if (vec == 32) emit<32>(out, M, K, L);
          if (vec == 64) emit<64>(out, M, K, L);
        }
  std::fclose(out);
  return 0;
}
