// Input and output of the oracle programs of tests/format_crosscheck.rs: every oracle takes
// `INPUT.f32 OUTPUT.bin`, reads the input as raw f32 values and writes its answers to the output.
#pragma once

#include <cstdio>
#include <vector>

// Reads argv[1] as f32 values and opens argv[2] for writing; false (after a message) on a bad
// command line or file.
static bool oracle_io(int argc, char **argv, std::vector<float> &xs, std::FILE *&out) {
  if (argc != 3) { std::fprintf(stderr, "usage: %s INPUT.f32 OUTPUT.bin\n", argv[0]); return false; }
  std::FILE *in = std::fopen(argv[1], "rb");
  if (!in) { std::perror("input"); return false; }
  float v;
  while (std::fread(&v, sizeof v, 1, in) == 1) xs.push_back(v);
  std::fclose(in);
  out = std::fopen(argv[2], "wb");
  if (!out) { std::perror("output"); return false; }
  return true;
}
