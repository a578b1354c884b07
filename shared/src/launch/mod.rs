//! Launching nodes: the user data a node boots with.

pub mod userdata;
