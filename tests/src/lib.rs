//! The local world.

pub mod moto;
