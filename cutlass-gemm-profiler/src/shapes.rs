//! GEMM shapes: shape files (TSV with `#` comment lines and a header `name m n k source`) and
//! `MxNxK` arguments.

use std::path::{Path, PathBuf};

use anyhow::{anyhow, bail, Context, Result};
use serde::Deserialize;

/// One shape of the suite: `D[m,n] = A[m,k] · W[n,k]ᵀ`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct Shape {
    pub name: String,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// The repository's shape suite, `bench/shapes.tsv`.
pub fn default_shapes_file() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench/shapes.tsv")
}

/// Reads a shape file: tab-separated, `#` lines are comments, the first other line is the
/// header; the columns `name`, `m`, `n` and `k` are used (others, such as `source`, ignored).
pub fn read_shapes(path: &Path) -> Result<Vec<Shape>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    parse_shapes(file).with_context(|| format!("{}", path.display()))
}

fn parse_shapes(input: impl std::io::Read) -> Result<Vec<Shape>> {
    let mut reader = csv::ReaderBuilder::new()
        .delimiter(b'\t')
        .comment(Some(b'#'))
        .quoting(false)
        .flexible(true)
        .from_reader(input);
    let shapes = reader
        .deserialize()
        .collect::<std::result::Result<Vec<Shape>, _>>()?;
    if shapes.is_empty() {
        bail!("no shapes (name, m, n, k columns)");
    }
    Ok(shapes)
}

/// Parses `MxNxK`; the shape is named as written.
pub fn parse_shape(s: &str) -> Result<Shape> {
    let v: Vec<usize> = s
        .split('x')
        .map(|x| x.parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|_| anyhow!("shape {s}: expected MxNxK"))?;
    match v[..] {
        [m, n, k] => Ok(Shape {
            name: s.to_string(),
            m,
            n,
            k,
        }),
        _ => bail!("shape {s}: expected MxNxK"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shape_file_with_comments_and_header() {
        let text = "# a comment\n# another\nname\tm\tn\tk\tsource\n\
                    square-4096\t4096\t4096\t4096\tsquare\n\
                    dsv3-a-m128\t128\t2112\t7168\tDeepSeek-V3 projection (DeepGEMM's shape list)\n";
        let shapes = parse_shapes(text.as_bytes()).unwrap();
        assert_eq!(
            shapes,
            [
                Shape {
                    name: "square-4096".into(),
                    m: 4096,
                    n: 4096,
                    k: 4096
                },
                Shape {
                    name: "dsv3-a-m128".into(),
                    m: 128,
                    n: 2112,
                    k: 7168
                },
            ]
        );
    }

    #[test]
    fn shape_file_errors() {
        assert!(parse_shapes("name\tm\tn\tk\tsource\n".as_bytes()).is_err());
        assert!(parse_shapes("name\tm\tn\tk\nx\t1\tfour\t3\n".as_bytes()).is_err());
    }

    #[test]
    fn repository_shape_files_parse() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../bench");
        for f in ["shapes.tsv", "shapes-broad.tsv"] {
            let shapes = read_shapes(&dir.join(f)).unwrap();
            assert!(shapes.iter().all(|s| s.m > 0 && s.n > 0 && s.k > 0), "{f}");
        }
        assert!(read_shapes(&default_shapes_file()).unwrap().len() > 10);
    }

    #[test]
    fn mxnxk() {
        let s = parse_shape("16x6144x4096").unwrap();
        assert_eq!(
            (s.name.as_str(), s.m, s.n, s.k),
            ("16x6144x4096", 16, 6144, 4096)
        );
        assert!(parse_shape("16x6144").is_err());
        assert!(parse_shape("16x6144x4096x2").is_err());
        assert!(parse_shape("16xAx4096").is_err());
    }
}
