//! The host's pressure readings (`crate::host::pressure`) in the Summary's shape: `psi` of a
//! CPU or memory figure, and the `io` figure, which carries nothing but its pressure (so it is
//! left out where the kernel has no `io.pressure`).

use jiff::Timestamp;

use super::summary::{IoStats, PsiData, PsiStats};
use crate::host::pressure::{Pressure, PressureLine};

fn data(line: &PressureLine) -> PsiData {
    PsiData {
        total: line.total_micros,
        avg10: line.avg10,
        avg60: line.avg60,
        avg300: line.avg300,
    }
}

pub fn psi(pressure: &Pressure) -> PsiStats {
    PsiStats {
        full: data(&pressure.full),
        some: data(&pressure.some),
    }
}

pub fn io(time: Timestamp, pressure: Option<&Pressure>) -> Option<IoStats> {
    pressure.map(|pressure| IoStats {
        time,
        psi: Some(psi(pressure)),
    })
}
