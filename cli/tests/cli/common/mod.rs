//! What the doc tests share.

#![allow(dead_code)]

pub mod document;
pub mod markdown;
