#!/usr/bin/env python3
"""Generate shared/data/instance-types.json, the instance catalog bundled into nodewright.

Inputs
  * moto's copy of EC2 DescribeInstanceTypes (moto/ec2/resources/instance_types.json[.gz],
    shipped inside the `moto` PyPI package), and
  * an on-demand price table (CSV `instance_type,usd_per_hour`, Linux, shared tenancy,
    us-east-1): shared/data/ec2-on-demand-prices-us-east-1.csv.

Output: a JSON array, one object per line, sorted by instance type name. Each object has
exactly the fields of `nodewright::catalog::InstanceType` plus `on_demand_usd_per_hour`.

Which types are kept
  1. The type has an on-demand price in the CSV (so every bundled type is priced).
  2. It runs Linux on amd64 or arm64: `x86_64` -> amd64, `arm64` -> arm64. Mac types
     (`x86_64_mac`, `arm64_mac`) and i386-only types are skipped.
  3. Its family is current generation. moto's `CurrentGeneration` flag is unreliable (it
     says m5, c5 and g5 are previous generation), so generation is judged from the family
     name by this rule:
       * categories c, m, r (general purpose, compute, memory): generation >= 5;
       * category t (burstable): t3, t3a, t4g and later (generation >= 3);
       * every other family is current unless it is listed in PREVIOUS_GENERATION below.
     PREVIOUS_GENERATION holds the families that run on the Xen hypervisor (everything
     AWS built before Nitro; in moto's data exactly these report `Hypervisor: xen`) plus
     the pre-Nitro families that are no longer in moto at all, and a1 (first Graviton,
     superseded by the Graviton2+ families m6g/c6g/r6g):
       a1 c1 c3 c4 cc2 cr1 d2 f1 g2 g3 g3s h1 hs1 i2 i3 m1 m2 m3 m4 p2 p3 r3 r4 t1 t2
       x1 x1e
     The script fails if a kept type still reports the Xen hypervisor, so a new Xen family
     cannot slip in unnoticed.

Field derivation (DescribeInstanceTypes -> InstanceType)
  vcpu                VCpuInfo.DefaultVCpus
  memory_mib          MemoryInfo.SizeInMiB
  arch                see rule 2
  hypervisor          Hypervisor (`nitro`, `xen`; empty for bare metal)
  bare_metal          BareMetal
  burstable           BurstablePerformanceSupported
  max_enis            NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces: the
                      VPC CNI only attaches ENIs on the default card, which is what the
                      max-pods formula needs (p5.48xlarge: 2, not the 64 of all cards;
                      eni-max-pods.txt lists 100 = 2 * (50 - 1) + 2). Falls back to
                      NetworkInfo.MaximumNetworkInterfaces when there are no cards.
  ipv4_per_eni        NetworkInfo.Ipv4AddressesPerInterface
  gpu                 GpuInfo.Gpus[0]: count = sum of counts, name, manufacturer, and
                      memory_mib = memory of ONE GPU (what Karpenter's
                      karpenter.k8s.aws/instance-gpu-memory label carries)
  accelerator         NeuronInfo.NeuronDevices (Inferentia / Trainium): count, name,
                      manufacturer "AWS", memory_mib of one device, cores = total
                      NeuronCores; falls back to InferenceAcceleratorInfo when there is no
                      NeuronInfo
  local_nvme_gb       InstanceStorageInfo.TotalSizeInGB when NvmeSupport != unsupported,
                      else 0
  network_bandwidth_mbps  sum over network cards of BaselineBandwidthInGbps * 1000
                      (p4d.24xlarge: 4 cards x 100 Gbps = 400000); if no card has it, the
                      number in NetworkPerformance ("Up to 12.5 Gigabit" -> 12500,
                      "4x 100 Gigabit" -> 400000, words like "Moderate" -> 0)
  encryption_in_transit   NetworkInfo.EncryptionInTransitSupported
  spot                'spot' in SupportedUsageClasses
  family/category/generation/size  parsed from the name like Karpenter does: family and
                      size split at '.', category and generation from the regex
                      `^([a-z]+)(-[0-9]+tb)?([0-9]+).*\\.`

Usage
  python3 scripts/gen_catalog.py [--moto PATH] [--prices PATH] [--out PATH]
Defaults: moto found via `import moto` (or the project venv), prices and output under
shared/data/ of this repository. Output is deterministic: same inputs, same bytes.
"""

from __future__ import annotations

import argparse
import csv
import glob
import gzip
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PRICES = os.path.join(REPO, "shared", "data", "ec2-on-demand-prices-us-east-1.csv")
DEFAULT_OUT = os.path.join(REPO, "shared", "data", "instance-types.json")

PREVIOUS_GENERATION = frozenset(
    "a1 c1 c3 c4 cc2 cr1 d2 f1 g2 g3 g3s h1 hs1 i2 i3 m1 m2 m3 m4 p2 p3 r3 r4 t1 t2 x1 x1e".split()
)

# Same pattern as karpenter-provider-aws pkg/providers/instancetype/types.go
# (instanceTypeScheme); group 1 is the category, group 3 the generation.
INSTANCE_TYPE_SCHEME = re.compile(r"(^[a-z]+)(-[0-9]+tb)?([0-9]+).*\.")

ARCHES = {"x86_64": "amd64", "arm64": "arm64"}


def parse_name(name: str):
    """`c6i.2xlarge` -> ("c6i", "c", 6, "2xlarge"); None when the name does not parse."""
    parts = name.split(".")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        return None
    m = INSTANCE_TYPE_SCHEME.match(name)
    if not m:
        return None
    return parts[0], m.group(1), int(m.group(3)), parts[1]


def is_current_generation(family: str, category: str, generation: int) -> bool:
    if family in PREVIOUS_GENERATION:
        return False
    if category in ("c", "m", "r"):
        return generation >= 5
    if category == "t":
        return generation >= 3
    return True


def bandwidth_mbps(network: dict) -> int:
    cards = network.get("NetworkCards") or []
    gbps = [c["BaselineBandwidthInGbps"] for c in cards if "BaselineBandwidthInGbps" in c]
    if gbps:
        return int(round(sum(gbps) * 1000))
    return performance_mbps(network.get("NetworkPerformance", ""))


def performance_mbps(text: str) -> int:
    """"Up to 12.5 Gigabit" -> 12500, "4x 100 Gigabit" -> 400000, "Moderate" -> 0."""
    m = re.search(r"(?:(\d+)x\s+)?(\d+(?:\.\d+)?)\s*Gigabit", text)
    if not m:
        return 0
    multiplier = int(m.group(1)) if m.group(1) else 1
    return int(round(multiplier * float(m.group(2)) * 1000))


def default_card_enis(network: dict) -> int:
    cards = network.get("NetworkCards") or []
    index = network.get("DefaultNetworkCardIndex", 0)
    for card in cards:
        if card.get("NetworkCardIndex", 0) == index and "MaximumNetworkInterfaces" in card:
            return int(card["MaximumNetworkInterfaces"])
    return int(network.get("MaximumNetworkInterfaces", 0))


def gpu_of(info: dict):
    gpus = (info.get("GpuInfo") or {}).get("Gpus") or []
    if not gpus:
        return None
    first = gpus[0]
    return {
        "count": sum(int(g.get("Count", 0)) for g in gpus),
        "name": first.get("Name", ""),
        "manufacturer": first.get("Manufacturer", ""),
        "memory_mib": int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
    }


def accelerator_of(info: dict):
    devices = (info.get("NeuronInfo") or {}).get("NeuronDevices") or []
    if devices:
        first = devices[0]
        return {
            "count": sum(int(d.get("Count", 0)) for d in devices),
            "name": first.get("Name", ""),
            "manufacturer": "AWS",
            "memory_mib": int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
            "cores": sum(
                int(d.get("Count", 0)) * int((d.get("CoreInfo") or {}).get("Count", 0))
                for d in devices
            ),
        }
    accels = (info.get("InferenceAcceleratorInfo") or {}).get("Accelerators") or []
    if accels:
        first = accels[0]
        return {
            "count": sum(int(a.get("Count", 0)) for a in accels),
            "name": first.get("Name", ""),
            "manufacturer": first.get("Manufacturer", ""),
            "memory_mib": int((first.get("MemoryInfo") or {}).get("SizeInMiB", 0)),
            "cores": 0,
        }
    return None


def local_nvme_gb(info: dict) -> int:
    storage = info.get("InstanceStorageInfo")
    if not storage or storage.get("NvmeSupport") == "unsupported":
        return 0
    return int(storage.get("TotalSizeInGB", 0))


def convert(info: dict, price: float):
    """One DescribeInstanceTypes entry -> catalog object, or (None, reason) to skip."""
    name = info["InstanceType"]
    parsed = parse_name(name)
    if parsed is None:
        return None, "name does not parse"
    family, category, generation, size = parsed
    if not is_current_generation(family, category, generation):
        return None, "previous generation"
    archs = (info.get("ProcessorInfo") or {}).get("SupportedArchitectures") or []
    arch = next((ARCHES[a] for a in archs if a in ARCHES), None)
    if arch is None:
        return None, f"architecture {archs}"
    network = info.get("NetworkInfo") or {}
    return {
        "name": name,
        "family": family,
        "category": category,
        "generation": generation,
        "size": size,
        "vcpu": int(info["VCpuInfo"]["DefaultVCpus"]),
        "memory_mib": int(info["MemoryInfo"]["SizeInMiB"]),
        "arch": arch,
        "hypervisor": info.get("Hypervisor", "") or "",
        "bare_metal": bool(info.get("BareMetal", False)),
        "burstable": bool(info.get("BurstablePerformanceSupported", False)),
        "max_enis": default_card_enis(network),
        "ipv4_per_eni": int(network.get("Ipv4AddressesPerInterface", 0)),
        "gpu": gpu_of(info),
        "accelerator": accelerator_of(info),
        "local_nvme_gb": local_nvme_gb(info),
        "network_bandwidth_mbps": bandwidth_mbps(network),
        "encryption_in_transit": bool(network.get("EncryptionInTransitSupported", False)),
        "spot": "spot" in (info.get("SupportedUsageClasses") or []),
        "on_demand_usd_per_hour": price,
    }, None


def find_moto_data() -> str:
    candidates = []
    try:
        import moto  # noqa: PLC0415 - optional, only to locate the data file

        candidates.append(os.path.join(os.path.dirname(moto.__file__), "ec2", "resources"))
    except ImportError:
        pass
    candidates += glob.glob("/work/main/.venv/lib/python3*/site-packages/moto/ec2/resources")
    candidates += glob.glob("/tmp/motovenv/lib/python3*/site-packages/moto/ec2/resources")
    for directory in candidates:
        for leaf in ("instance_types.json", "instance_types.json.gz"):
            path = os.path.join(directory, leaf)
            if os.path.exists(path):
                return path
    sys.exit("moto's instance_types.json not found; install moto or pass --moto PATH")


def load_moto(path: str) -> dict:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        data = json.load(f)
    # moto keys the data by type name; accept a DescribeInstanceTypes response shape too.
    if isinstance(data, dict) and "InstanceTypes" in data:
        data = {t["InstanceType"]: t for t in data["InstanceTypes"]}
    return data


def load_prices(path: str) -> dict:
    prices = {}
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            price = float(row["usd_per_hour"])
            if price > 0:
                prices[row["instance_type"]] = price
    return prices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--moto", help="moto instance_types.json or .json.gz")
    parser.add_argument("--prices", default=DEFAULT_PRICES)
    parser.add_argument("--out", default=DEFAULT_OUT)
    args = parser.parse_args()

    types = load_moto(args.moto or find_moto_data())
    prices = load_prices(args.prices)
    kept, skipped = [], {}
    for name in sorted(types):
        if name not in prices:
            skipped["no on-demand price"] = skipped.get("no on-demand price", 0) + 1
            continue
        entry, reason = convert(types[name], prices[name])
        if entry is None:
            skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if entry["hypervisor"] == "xen":
            sys.exit(f"{name}: kept but runs on Xen; add its family to PREVIOUS_GENERATION")
        kept.append(entry)

    lines = [json.dumps(e, separators=(",", ":"), sort_keys=False) for e in kept]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("[\n" + ",\n".join(lines) + "\n]\n")
    print(f"wrote {len(kept)} instance types to {args.out}", file=sys.stderr)
    for reason, count in sorted(skipped.items()):
        print(f"  skipped {count}: {reason}", file=sys.stderr)


if __name__ == "__main__":
    main()
