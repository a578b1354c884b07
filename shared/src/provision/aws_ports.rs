//! One value with every AWS port the provisioner uses: the EC2 adapter for most of them,
//! the image adapter (EC2 + SSM) for AMIs, a price source for on-demand prices, and the IAM
//! adapter for instance profiles. Each port is answered by its part through
//! [`Delegate`] (see [`crate::aws::delegate`]), not forwarded here by hand.

use crate::aws::delegate::port;
use crate::aws::{BundledPrices, Delegate, IamAdapter};

/// `ec2` answers every port but [`crate::aws::ImageResolver`], which `images` answers,
/// [`crate::aws::OnDemandPriceSource`], which `prices` answers (the Price List API in AWS,
/// [`crate::aws::PricingAdapter`], or [`BundledPrices`], the default, where there is none),
/// and [`crate::aws::InstanceProfiles`], which `iam` answers.
#[derive(Debug, Clone)]
pub struct AwsPorts<E, I, P = BundledPrices, M = IamAdapter> {
    pub ec2: E,
    pub images: I,
    pub prices: P,
    pub iam: M,
}

impl<E, I, P, M, X: port::Ec2> Delegate<X> for AwsPorts<E, I, P, M> {
    type To = E;
    fn delegate(&self) -> &E {
        &self.ec2
    }
}

impl<E, I, P, M> Delegate<port::Images> for AwsPorts<E, I, P, M> {
    type To = I;
    fn delegate(&self) -> &I {
        &self.images
    }
}

impl<E, I, P, M> Delegate<port::Prices> for AwsPorts<E, I, P, M> {
    type To = P;
    fn delegate(&self) -> &P {
        &self.prices
    }
}

impl<E, I, P, M> Delegate<port::Profiles> for AwsPorts<E, I, P, M> {
    type To = M;
    fn delegate(&self) -> &M {
        &self.iam
    }
}
