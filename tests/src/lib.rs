//! The local world.
