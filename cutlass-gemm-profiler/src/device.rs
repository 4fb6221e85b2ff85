//! The GPU under test and its roofline: dense bf16 tensor-core peak and measured copy bandwidth.

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{sys, CudaContext, CudaStream};
use cutlass_gemm::DeviceInfo;

use crate::kind::Kind;
use crate::timing;

/// The device the profile runs on (device 0, its default stream).
pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    pub l2_bytes: usize,
    pub roofline: Roofline,
}

/// What bounds a GEMM on this device.
#[derive(Clone, Debug)]
pub struct Roofline {
    /// The device's name, as the driver reports it.
    pub device: String,
    /// Dense bf16 tensor-core TFLOP/s.
    pub peak_bf16: f64,
    /// Measured device-to-device copy bandwidth, GB/s (read + write).
    pub copy_gbs: f64,
}

impl Roofline {
    /// The roofline (TFLOP/s) for a problem of `flops` moving `bytes`, and whether memory binds.
    pub fn bound(&self, kind: Kind, flops: f64, bytes: f64) -> (f64, bool) {
        let compute = self.peak_bf16 * kind.speed();
        let memory = flops / bytes * self.copy_gbs * 1e9 / 1e12;
        (compute.min(memory), memory < compute)
    }
}

impl Device {
    pub fn open() -> Result<Device> {
        let ctx = CudaContext::new(0)?;
        let stream = ctx.default_stream();
        let info = DeviceInfo::query(&ctx)?;
        let name = ctx.name()?;
        let attr = |a| ctx.attribute(a);
        let l2_bytes = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as usize;
        // NVIDIA's dense bf16 figures for the Hopper parts (at their tensor-core boost clock);
        // other devices: 4096 FLOP per clock per SM at the reported clock.
        let peak_bf16 = if name.contains("H100") && name.contains("PCIe") {
            756.0
        } else if name.contains("H100") || name.contains("H200") || name.contains("H800") {
            989.4
        } else {
            let khz = attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? as f64;
            4096.0 * info.sm_count as f64 * khz * 1e3 / 1e12
        };
        let mut d = Device {
            ctx,
            stream,
            info,
            l2_bytes,
            roofline: Roofline {
                device: name,
                peak_bf16,
                copy_gbs: 0.0,
            },
        };
        d.roofline.copy_gbs = d.measure_copy()?;
        Ok(d)
    }

    pub fn name(&self) -> &str {
        &self.roofline.device
    }

    /// cuMemcpyDtoD of 1 GiB, best of 5; bytes read plus written over time.
    fn measure_copy(&self) -> Result<f64> {
        let len = 1usize << 30;
        let src = self.stream.alloc_zeros::<u8>(len)?;
        let mut dst = self.stream.alloc_zeros::<u8>(len)?;
        let mut best = f64::INFINITY;
        for _ in 0..5 {
            let s = timing::event(&self.ctx)?;
            let e = timing::event(&self.ctx)?;
            s.record(&self.stream)?;
            self.stream.memcpy_dtod(&src, &mut dst)?;
            e.record(&self.stream)?;
            e.synchronize()?;
            best = best.min(s.elapsed_ms(&e)? as f64 / 1e3);
        }
        Ok(2.0 * len as f64 / best / 1e9)
    }
}
