"""Provider region → ISO 3166-1 alpha-2 country, for the regions met in the catalogs we import.

Only regions whose country is documented or spelled in the name are listed; an unknown region maps to "" (the
offers format allows an empty country) rather than to a guess, since placement filters act on it.
"""

from __future__ import annotations

import re

_AWS = {
    "us-east-1": "US", "us-east-2": "US", "us-west-1": "US", "us-west-2": "US", "ca-central-1": "CA",
    "eu-central-1": "DE", "eu-central-2": "CH", "eu-west-1": "IE", "eu-west-2": "GB", "eu-west-3": "FR",
    "eu-north-1": "SE", "eu-south-1": "IT", "eu-south-2": "ES", "ap-northeast-1": "JP", "ap-northeast-2": "KR",
    "ap-northeast-3": "JP", "ap-south-1": "IN", "ap-south-2": "IN", "ap-southeast-1": "SG", "ap-southeast-2": "AU",
    "ap-southeast-3": "ID", "ap-southeast-4": "AU", "ap-east-1": "HK", "me-central-1": "AE", "me-south-1": "BH",
    "sa-east-1": "BR", "af-south-1": "ZA", "il-central-1": "IL",
}
_GCP = {
    "asia-east1": "TW", "asia-east2": "HK", "asia-northeast1": "JP", "asia-northeast2": "JP",
    "asia-northeast3": "KR", "asia-south1": "IN", "asia-south2": "IN", "asia-southeast1": "SG",
    "asia-southeast2": "ID", "australia-southeast1": "AU", "australia-southeast2": "AU", "europe-north1": "FI",
    "europe-west1": "BE", "europe-west2": "GB", "europe-west3": "DE", "europe-west4": "NL", "europe-west6": "CH",
    "europe-west8": "IT", "europe-west9": "FR", "europe-west10": "DE", "europe-west12": "IT",
    "europe-central2": "PL", "europe-southwest1": "ES", "me-west1": "IL", "me-central1": "QA",
    "me-central2": "SA", "northamerica-northeast1": "CA", "northamerica-northeast2": "CA",
    "southamerica-east1": "BR", "southamerica-west1": "CL", "africa-south1": "ZA",
}
_AZURE = {
    "eastus": "US", "eastus2": "US", "westus": "US", "westus2": "US", "westus3": "US", "centralus": "US",
    "southcentralus": "US", "northcentralus": "US", "westeurope": "NL", "northeurope": "IE",
    "swedencentral": "SE", "francecentral": "FR", "germanywestcentral": "DE", "uksouth": "GB",
    "japaneast": "JP", "australiaeast": "AU", "southeastasia": "SG", "canadacentral": "CA",
}
_LAMBDA = {
    # Lambda documents these region names with their cities; the ones whose country we could not confirm
    # (europe-south-1, me-west-1) are left out on purpose.
    "asia-northeast-1": "JP", "asia-northeast-2": "KR", "asia-south-1": "IN", "australia-east-1": "AU",
    "europe-central-1": "DE",
}
_NEBIUS = {"eu-north1": "FI", "eu-north2": "IS", "eu-west1": "FR", "us-central1": "US", "me-west1": "IL"}
# Shadeform and similar spell the country in the region ("helsinki-finland-3").
_COUNTRY_WORDS = {
    "usa": "US", "us": "US", "canada": "CA", "india": "IN", "germany": "DE", "finland": "FI", "norway": "NO",
    "uk": "GB", "australia": "AU", "france": "FR", "iceland": "IS", "singapore": "SG", "sweden": "SE",
    "japan": "JP", "poland": "PL", "netherlands": "NL", "spain": "ES", "italy": "IT",
}
_CC = re.compile(r"[A-Z]{2}")


def country_of(provider: str, region: str) -> str:
    """The region's country code, or "" when we do not know it."""
    p, r = provider.lower(), region.strip()
    rl = r.lower()
    if p == "aws":
        return _AWS.get(rl, "")
    if p == "gcp":
        return "US" if rl.startswith("us-") else _GCP.get(rl, "")
    if p == "azure":
        return _AZURE.get(rl, "")
    if p == "lambda":
        if rl.startswith("us-"):
            return "US"
        return _LAMBDA.get(rl, "")
    if p == "nebius":
        return _NEBIUS.get(rl, "")
    if p == "runpod":  # SkyPilot's runpod Region is already a country code (the zone is the data centre)
        return r if _CC.fullmatch(r) else ""
    if p == "vast":  # "State, CC, continent"; the state may be empty (", US, NA")
        parts = [x.strip() for x in r.split(",")]
        return parts[1] if len(parts) == 3 and _CC.fullmatch(parts[1]) else ""
    if p == "simplepod":  # "Europe-NO", "North America-CA"
        tail = r.rsplit("-", 1)[-1]
        return tail if _CC.fullmatch(tail) else ""
    if p == "cudo":  # "se-stockholm-1": the country leads
        head = rl.split("-", 1)[0].upper()
        return head if _CC.fullmatch(head) else ""
    if p in ("mithril", "hyperbolic", "paperspace") and rl.startswith("us-"):
        return "US"
    if p == "seeweb":  # it-fr2 (Frosinone), it-mi2 (Milan)
        return "IT" if rl.startswith("it-") else ""
    if p == "shadeform":
        if rl.startswith("us-"):
            return "US"
        parts = rl.split("-")
        return _COUNTRY_WORDS.get(parts[1], "") if len(parts) == 3 else ""
    return ""
