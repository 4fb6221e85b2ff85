//! Number formats on the host: the scalar types of the kernels ([`numeric`]), packed sub-byte
//! storage ([`packed`]), the element types of the GEMM plans ([`element`]) and the scale-factor
//! layouts of scaled formats ([`scale_layout`]).

pub mod element;
pub mod numeric;
pub mod packed;
pub mod scale_layout;

/// A value with an exact `f64` value: what the host reference ([`crate::reference`]) reads.
pub trait HostValue: Copy + Sync {
    /// The exact value.
    fn host_value(self) -> f64;
}

macro_rules! host_value {
    ($($t:ty => |$v:ident| $e:expr),* $(,)?) => {
        $(impl HostValue for $t {
            fn host_value(self) -> f64 {
                let $v = self;
                $e
            }
        })*
    };
}
host_value!(
    half::f16 => |v| v.to_f64(),
    half::bf16 => |v| v.to_f64(),
    f32 => |v| v as f64,
    f64 => |v| v,
    i8 => |v| v as f64,
    u8 => |v| v as f64,
    i32 => |v| v as f64,
    numeric::Tf32 => |v| v.to_f32() as f64,
    numeric::E4M3 => |v| v.to_f64(),
    numeric::E5M2 => |v| v.to_f64(),
    numeric::E2M3 => |v| v.to_f64(),
    numeric::E3M2 => |v| v.to_f64(),
    numeric::E2M1 => |v| v.to_f64(),
    numeric::UE8M0 => |v| v.to_f64(),
    numeric::UE4M3 => |v| v.to_f64(),
);
