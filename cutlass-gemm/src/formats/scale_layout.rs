//! Scale-factor layouts: the `Sm1xxBlockScaledConfig` layout the SM100/SM120 block-scaled kernels
//! read (and write, for block-scaled outputs), and the orders of FP8 blockwise scale matrices.

/// The scale-factor layout of `cutlass::detail::Sm1xxBlockScaledConfig<SFVecSize>` for SFA (rows =
/// M) and SFB (rows = N), K-major: `((32,4), ceil(rows/128)), ((SFVec,4), ceil(K/(4 SFVec)), L)`
/// with strides `((16,4), 512 ceil(K/(4 SFVec))), ((0,1), 512, 512 ceil(K/(4 SFVec)) ceil(rows/128))`.
///
/// The basic block is 512 bytes: 128 rows by 4 scale factors, row `r` of a block at
/// `(r % 32) * 16 + (r / 32) * 4`; blocks go along K first, then rows, then the batch. Rows and
/// scale columns beyond the problem are padding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScaleFactorLayout {
    /// M (for SFA) or N (for SFB).
    pub rows: usize,
    /// K, in elements.
    pub k: usize,
    /// Batch count.
    pub batch: usize,
    /// Elements per scale factor (16 or 32; 32 or 64 for sparse).
    pub vec: usize,
}

impl ScaleFactorLayout {
    /// The layout for a `rows x k` operand with `vec` elements per scale.
    pub fn new(rows: usize, k: usize, batch: usize, vec: usize) -> Self {
        ScaleFactorLayout {
            rows,
            k,
            batch,
            vec,
        }
    }

    /// Scale factors per row: `ceil(k / vec)`.
    pub fn sf_cols(&self) -> usize {
        self.k.div_ceil(self.vec)
    }

    fn k_blocks(&self) -> usize {
        self.sf_cols().div_ceil(4)
    }

    fn row_blocks(&self) -> usize {
        self.rows.div_ceil(128)
    }

    /// Bytes (= scale factors) the buffer holds, padding included.
    pub fn size(&self) -> usize {
        512 * self.k_blocks() * self.row_blocks() * self.batch
    }

    /// Offset of the scale of element (row, k) of batch l: CUTLASS's `layout_sf(make_coord(row, k, l))`.
    pub fn offset(&self, row: usize, k: usize, l: usize) -> usize {
        self.offset_sf(row, k / self.vec, l)
    }

    /// Offset of scale factor (row, j) of batch l, where j indexes scales along K.
    pub fn offset_sf(&self, row: usize, j: usize, l: usize) -> usize {
        let within = (row % 32) * 16 + ((row / 32) % 4) * 4 + (j % 4);
        let block = (row / 128) * self.k_blocks() + j / 4;
        l * 512 * self.k_blocks() * self.row_blocks() + block * 512 + within
    }

    /// From a plain row-major `[batch][rows][sf_cols]` scale matrix to the swizzled layout; padding
    /// gets `pad`.
    pub fn swizzle<T: Copy>(&self, plain: &[T], pad: T) -> Vec<T> {
        assert_eq!(
            plain.len(),
            self.batch * self.rows * self.sf_cols(),
            "plain scale matrix size"
        );
        let mut out = vec![pad; self.size()];
        let c = self.sf_cols();
        for l in 0..self.batch {
            for r in 0..self.rows {
                for j in 0..c {
                    out[self.offset_sf(r, j, l)] = plain[(l * self.rows + r) * c + j];
                }
            }
        }
        out
    }

    /// From the swizzled layout back to a plain row-major `[batch][rows][sf_cols]` matrix.
    pub fn unswizzle<T: Copy>(&self, swizzled: &[T]) -> Vec<T> {
        assert!(
            swizzled.len() >= self.size(),
            "swizzled scale buffer too small"
        );
        let c = self.sf_cols();
        let mut out = Vec::with_capacity(self.batch * self.rows * c);
        for l in 0..self.batch {
            for r in 0..self.rows {
                for j in 0..c {
                    out.push(swizzled[self.offset_sf(r, j, l)]);
                }
            }
        }
        out
    }
}

/// The order of a blockwise scale matrix of a `[rows, cols]` tensor with `row_blocks x col_blocks`
/// scales (`cols` is K).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScaleMajor {
    /// Row-major `[row_blocks, col_blocks]`: the scales of one row block are contiguous (the Triton
    /// recipe's and [`quantize_fp8_blockwise`](crate::quantize::host::quantize_fp8_blockwise)'s order).
    K,
    /// Column-major: the scales of one k-block are contiguous, `[col_blocks, row_blocks]` — the
    /// M-/N-major order CUTLASS's `Sm90BlockwiseScaleConfig` reads (and loads by TMA).
    MN,
}

impl ScaleMajor {
    /// Offset of the scale of row block `bi`, column block `bj`.
    pub fn offset(self, bi: usize, bj: usize, row_blocks: usize, col_blocks: usize) -> usize {
        match self {
            ScaleMajor::K => bi * col_blocks + bj,
            ScaleMajor::MN => bj * row_blocks + bi,
        }
    }
}

/// Reorders a `row_blocks x col_blocks` scale matrix from `from` to `to` order.
pub fn scales_to_major(
    scales: &[f32],
    row_blocks: usize,
    col_blocks: usize,
    from: ScaleMajor,
    to: ScaleMajor,
) -> Vec<f32> {
    assert_eq!(scales.len(), row_blocks * col_blocks, "scale count");
    let mut out = vec![0.0f32; scales.len()];
    for bi in 0..row_blocks {
        for bj in 0..col_blocks {
            out[to.offset(bi, bj, row_blocks, col_blocks)] =
                scales[from.offset(bi, bj, row_blocks, col_blocks)];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_block_order_matches_the_seed() {
        // "M0SF0 to M0SF3, M32SF0 to M32SF3, M64SF0 to M64SF3, and M96SF0 to M96SF3 are stored
        // consecutively".
        let l = ScaleFactorLayout::new(128, 4 * 32, 1, 32);
        let order: Vec<usize> = [0, 32, 64, 96]
            .iter()
            .flat_map(|&m| (0..4).map(move |j| l.offset_sf(m, j, 0)))
            .collect();
        assert_eq!(order, (0..16).collect::<Vec<_>>());
        assert_eq!(l.offset_sf(1, 0, 0), 16);
        assert_eq!(l.size(), 512);
    }
}
