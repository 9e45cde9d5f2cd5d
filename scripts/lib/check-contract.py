"""The event contract's checks (scripts/check-contract runs this with Debian's python3-jsonschema and python3-yaml).

1. docs/asyncapi.yaml is a valid AsyncAPI 3.0.0 document (the official JSON Schema, vendored in docs/schemas/),
   and each of its payload schemas a valid JSON Schema draft 07.
2. Every field the worker's decoder reads is in the schemas, and every field in the schemas is read by it.
3. The document's examples and examples/*.jsonl: the schemas and the worker's decoder agree on each (the demo's
   streams hold a few bad events on purpose).
4. A generated corpus of valid and invalid events is given to the schemas and to the worker's decoder
   (`livedelivery validate --format json`): they must agree on every event, and for every refusal the field the
   decoder names must be among those the schema names.

With --published FILE, only this instead: the events the tests published (LIVEDELIVERY_RECORD_EVENTS, recorded by
Sources/TestSupport/PublishedEvents.swift with the decoder's verdict given that message's routing key and
message_id). Each body goes to the schema of the channel its routing key names; the schemas' verdict must equal the
decoder's, as above (the tests publish bad events on purpose); each `traceparent` header is read by the worker
exactly when the TraceParent schema accepts it; each `order_id` header is an OrderID; and where the routing key and message_id do not decide,
`livedelivery validate` must give the recorded verdict.

    python3 scripts/lib/check-contract.py LIVEDELIVERY_BINARY [--events N] [--seed S] [--keep FILE]
    python3 scripts/lib/check-contract.py LIVEDELIVERY_BINARY --published FILE
"""

import argparse
import base64
import collections
import json
import math
import pathlib
import random
import re
import subprocess
import sys
import tempfile

import jsonschema
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCUMENT = ROOT / "docs" / "asyncapi.yaml"
ASYNCAPI_SCHEMA = ROOT / "docs" / "schemas" / "asyncapi-3.0.0.json"
MAX_BODY = 65536
HEADER_SCHEMAS = {"OrderEventHeaders", "UserEventHeaders", "TraceParent"}


def fail(message):
    print(f"check-contract: {message}", file=sys.stderr)
    sys.exit(1)


# MARK: - Timestamps exactly as the worker reads them (RFC3339.parse, then Foundation's reference date)

def days_in_month(year, month):
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


def days_from_civil(year, month, day):
    y = year - 1 if month <= 2 else year
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


TIMESTAMP = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))")


def reference_seconds(text):
    """Seconds since 2001-01-01 as Foundation's Date holds what the worker parsed, or None."""
    if not isinstance(text, str) or not 1 <= len(text) <= 64:
        return None
    m = TIMESTAMP.fullmatch(text)
    if not m:
        return None
    year, month, day, hour, minute, second = (int(m.group(i)) for i in range(1, 7))
    if not (1 <= month <= 12 and 1 <= day <= days_in_month(year, month) and hour <= 23 and minute <= 59
            and second <= 60):
        return None
    fraction, scale = 0.0, 0.1
    for digit in m.group(7) or "":
        fraction += float(int(digit)) * scale
        scale /= 10
    offset = 0
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            return None
        offset = (-1 if m.group(9) == "-" else 1) * (oh * 3600 + om * 60)
    seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset
    return (float(seconds) + fraction) - 978307200.0


# MARK: - The validator: draft 07 and the document's one extension keyword

def not_after(validator, rule, instance, schema):
    if not isinstance(instance, dict):
        return
    later = reference_seconds(instance.get(rule["property"]))
    earlier = reference_seconds(instance.get(rule["notAfter"]))
    if later is None or earlier is None:
        return
    if not later - earlier <= rule["plusSeconds"]:
        at = rule.get("reportAt", rule["property"])
        yield jsonschema.ValidationError(
            f"{rule['property']} is more than {rule['plusSeconds']} s after {rule['notAfter']}",
            path=[at] if at else [])


ContractValidator = jsonschema.validators.extend(
    jsonschema.Draft7Validator, {"x-livedelivery-not-after": not_after})


def validator_for(document, schema_name):
    root = dict(document)
    root["$ref"] = f"#/components/schemas/{schema_name}"
    return ContractValidator(root)


def error_fields(error):
    """Every field an error (and each alternative it tried) names, as dotted paths like the decoder's."""
    path = [str(p) for p in error.absolute_path]
    fields = set()
    if error.validator == "required" and isinstance(error.instance, dict):
        fields |= {".".join(path + [name]) for name in error.validator_value if name not in error.instance}
    else:
        fields.add(".".join(path))
    for sub in error.context or []:
        fields |= error_fields(sub)
    return fields


# MARK: - JSON as the worker's parser takes it

class Refused(Exception):
    pass


def finite(text, convert):
    value = convert(text)
    if not math.isfinite(float(text)):
        raise Refused("a number that is not finite")
    return value


def strict_strings(value):
    if isinstance(value, str):
        value.encode("utf-8")  # a lone surrogate raises
    elif isinstance(value, list):
        for item in value:
            strict_strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            strict_strings(key)
            strict_strings(item)


def parse_body(body):
    """The parsed body, or raises Refused: over 64 KiB, not UTF-8, not JSON, a number not finite, a lone surrogate."""
    if len(body) > MAX_BODY:
        raise Refused("over 64 KiB")
    try:
        text = body.decode("utf-8")
        value = json.loads(
            text, parse_float=lambda t: finite(t, float), parse_int=lambda t: finite(t, int),
            parse_constant=lambda t: (_ for _ in ()).throw(Refused(t)))
        strict_strings(value)
        return value
    except (UnicodeError, ValueError, Refused) as error:
        raise Refused(str(error)) from None


def schema_verdict(validator, body):
    """(accepted, fields the schema names)."""
    try:
        instance = parse_body(body)
    except Refused:
        return False, {""}
    fields = set()
    for error in validator.iter_errors(instance):
        fields |= error_fields(error)
    return not fields, fields


# MARK: - The generated corpus

TEXT_CHARS = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_ ") + [
    "\u00e9", "\u65e5", "\U0001f69a", "\u00fc", "\u0416"]
COMBINING = "e\u0301"  # one character for the worker, two code points for JSON Schema
WHITESPACE = [" ", "\t", "\n", "\u00a0", "\u3000", "\u2028"]
STATUSES = ["placed", "confirmed", "preparing", "ready_for_pickup", "picked_up", "out_for_delivery", "arriving",
            "delivered", "cancelled", "delivery_failed"]
REASONS = ["dismissed_by_user", "ended_on_device", "expired"]
LIMITS = {"event_id": 128, "order_id": 64, "user_id": 64, "activity_id": 128, "device_id": 128}


class Generator:
    def __init__(self, seed):
        self.r = random.Random(seed)

    def pick(self, items):
        return items[self.r.randrange(len(items))]

    def text(self, limit, exact=None):
        """1..limit code points (at most `limit` whatever it holds): ASCII, multi-byte and combining characters."""
        length = exact or self.pick([1, 2, 8, 20, limit // 2, limit - 1, limit])
        out, used = [], 0
        while used < length:
            if length - used >= 2 and self.r.random() < 0.05:
                out.append(COMBINING)
                used += 2
            else:
                out.append(self.pick(TEXT_CHARS) if self.r.random() < 0.3 else self.pick(TEXT_CHARS[:62]))
                used += 1
        return "".join(out)

    def too_long(self, limit):
        return "".join(self.pick(TEXT_CHARS[:62] + TEXT_CHARS[65:]) for _ in range(limit + self.pick([1, 2, 50])))

    def timestamp(self, year=None):
        year = year if year is not None else self.pick([2026, 2026, 2024, 2000, 1999, 9999, 1])
        month = self.r.randint(1, 12)
        day = self.r.randint(1, days_in_month(year, month))
        text = f"{year:04d}-{month:02d}-{day:02d}{self.pick(['T', 'T', 't', ' '])}"
        text += f"{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.pick(['00', '05', '59', '60'])}"
        text += self.pick(["", "", ".5", ".123", ".123456789"])
        return text + self.pick(["Z", "Z", "z", "+02:00", "-05:30", "+23:59"])

    def bad_timestamp(self):
        return self.pick([
            "2026-02-29T10:00:00Z", "1900-02-29T10:00:00Z", "2026-04-31T10:00:00Z", "2026-13-01T10:00:00Z",
            "2026-11-21T24:00:00Z", "2026-11-21T10:60:00Z", "2026-11-21T10:00:61Z", "2026-11-21T10:00:00",
            "2026-11-21T10:00:00+24:00", "2026-11-21T10:00:00.Z", "2026-11-21", "2026-11-21T10:00:00Z\n",
            "2026-11-21T10:00:00Z ", " 2026-11-21T10:00:00Z", "2026-11-21X10:00:00Z", "26-11-21T10:00:00Z",
            "2026-11-21T10:00:00." + "1" * 60 + "Z", "2026-11-21T10:00:00+0200", "\u0662026-11-21T10:00:00Z",
            "", "now"])

    def token(self):
        n = self.pick([16, 32, 32, 100, 200])
        digits = "0123456789abcdef" if self.r.random() < 0.8 else "0123456789ABCDEFabcdef"
        return "".join(self.pick(digits) for _ in range(2 * n))

    def bundle_id(self):
        return self.pick(["com.example.pizza", "com.example.app", "a", "-", "x-1.y", "A.b.C9",
                          "a" * 155, "com..example"])

    def valid(self, type_):
        e = {"type": type_, "version": self.pick([1, 1, 1, 1.0]), "event_id": self.text(128),
             "occurred_at": self.timestamp()}
        if type_ == "order.status":
            e.update(order_id=self.text(64), user_id=self.text(64), status=self.pick(STATUSES))
            self.maybe(e, "sequence", lambda: self.pick([0, 1, 7, 2**63 - 1, 1e15, 3.0]), null=True)
            self.maybe(e, "order_number", lambda: self.pick([10023, -5, 0, -2**63, 2**63 - 1, 1e18]), null=True)
            for key in ("merchant", "courier"):
                self.maybe(e, key, lambda: self.pick([
                    {"name": self.text(100)}, {}, {"name": None}, {"name": ""}, {"name": " " * 150},
                    {"name": self.text(100), "extra": 1}]), null=True)
            if self.r.random() < 0.5:
                if self.r.random() < 0.15:
                    e["eta"] = None
                else:
                    a, b = sorted([self.timestamp(2026), self.timestamp(2026)], key=reference_seconds)
                    e["eta"] = {"earliest": a, "latest": b}
        elif type_ == "order.followers":
            e.update(order_id=self.text(64), followers=[self.text(64) for _ in range(self.pick([0, 1, 2, 20]))])
            if e["followers"] and self.r.random() < 0.2:
                e["followers"].append(e["followers"][0])
                e["followers"] = e["followers"][:20]
            self.maybe(e, "sequence", lambda: self.pick([0, 3, 99]), null=True)
        elif type_ == "activity.token":
            e.update(order_id=self.text(64), activity_id=self.text(128), token=self.token(),
                     bundle_id=self.bundle_id(), environment=self.pick(["production", "sandbox"]))
            self.maybe(e, "device_id", lambda: self.pick([self.text(128), "", " " * 300]), null=True)
            if self.r.random() < 0.4:
                e["occurred_at"] = "2026-11-21T10:00:00.250Z"
                e["scheduled_start"] = self.pick([
                    "2026-11-28T10:00:00.250Z", "2026-11-28T10:00:00Z", "2026-11-21T18:30:00Z",
                    "2026-11-20T10:00:00Z", "2026-11-28T12:00:00+02:00", "", "   ", None])
        elif type_ == "activity.push_to_start_token":
            e.update(user_id=self.text(64), device_id=self.text(128), token=self.token(),
                     bundle_id=self.bundle_id(), environment=self.pick(["production", "sandbox"]),
                     attributes_type=self.pick(["DeliveryAttributes", "App.Delivery_2", "_", "a" * 128]))
        elif type_ == "activity.settings":
            e.update(user_id=self.text(64), device_id=self.text(128),
                     activities_enabled=self.pick([True, False]), frequent_pushes_enabled=self.pick([True, False]))
        else:
            e.update(order_id=self.text(64), activity_id=self.text(128), reason=self.pick(REASONS))
        if self.r.random() < 0.1:
            e["x_unknown"] = self.pick([1, "two", [3], {"four": 4}, None])
        return e

    def maybe(self, e, key, make, null=False):
        roll = self.r.random()
        if roll < 0.5:
            e[key] = make()
        elif null and roll < 0.6:
            e[key] = None

    def wrong_type(self, current):
        choices = [None, 1, 2.5, True, "text", [], {}, ["a"]]
        return self.pick([c for c in choices if type(c) is not type(current)])

    def break_field(self, e):
        keys = sorted(e.keys())
        key = self.pick(keys)
        value = e[key]
        roll = self.r.random()
        if roll < 0.15:
            del e[key]
            return
        if roll < 0.3:
            e[key] = self.wrong_type(value)
            return
        if key in ("occurred_at", "scheduled_start"):
            e[key] = self.bad_timestamp()
        elif key in LIMITS:
            e[key] = self.pick([self.too_long(LIMITS[key]), "", "a\u0000b"])
        elif key == "type":
            e[key] = self.pick(["order.Status", "order.created", "", "activity.token "])
        elif key == "version":
            e[key] = self.pick([2, 0, 1.5, "1", -1, 1e300])
        elif key in ("status", "reason", "environment"):
            e[key] = self.pick(["", "Delivered", "unknown", "sandbox ", value + "x" if isinstance(value, str) else 1])
        elif key == "token":
            e[key] = self.pick(["ab" * 15, "ab" * 201, "abc" * 11, "zz" * 16, "ab" * 16 + "\n", "", "ab " * 16])
        elif key == "bundle_id":
            e[key] = self.pick([".com.app", "com.app.", "com_app", "c\u00f6m.app", "a" * 156, "com app", "."])
        elif key == "attributes_type":
            e[key] = self.pick(["Delivery<Attributes>", "Delivery Attributes", "a" * 129, "Delivery-Attributes"])
        elif key in ("sequence", "order_number"):
            e[key] = self.pick([1.5, "7", 2**63, -2**63 - 1, 1e300, -1] if key == "sequence" else
                               [1.5, "7", 2**63, -2**63 - 1, -1e300])
        elif key == "followers":
            e[key] = self.pick([[self.text(64)] * 21, [None], [""], [self.too_long(64)], "u-1", [1]])
        elif key == "eta" and isinstance(value, dict):
            e[key] = self.pick([
                {"earliest": "2026-11-21T10:30:00Z", "latest": "2026-11-21T10:20:00Z"},
                {"earliest": "2026-11-21T10:30:00.001Z", "latest": "2026-11-21T10:30:00Z"},
                {"earliest": "2026-11-21T12:30:00+02:00", "latest": "2026-11-21T10:29:59Z"},
                {"earliest": value["earliest"]}, {"latest": value["latest"]},
                {"earliest": None, "latest": value["latest"]}, {"earliest": value["earliest"], "latest": 5}])
        elif key in ("merchant", "courier"):
            e[key] = self.pick([{"name": self.too_long(100)}, {"name": 5}, {"name": "a\u0000"}, "Pizza", [1]])
        elif key == "device_id":
            e[key] = self.pick([self.too_long(128), "a\u0000b"])
        elif key in ("activities_enabled", "frequent_pushes_enabled"):
            e[key] = self.pick(["true", 1, 0, None])
        else:
            e[key] = self.wrong_type(value)

    def late_schedule(self, e):
        e["occurred_at"] = "2026-11-21T10:00:00.250Z"
        e["scheduled_start"] = self.pick([
            "2026-11-28T10:00:00.251Z", "2026-11-28T10:00:01Z", "2026-11-28T10:00:00.250001Z",
            "2026-11-28T12:00:01+02:00", "9999-12-31T23:59:59Z"])

    def body(self, index):
        """One line of the corpus: bytes."""
        roll = self.r.random()
        if roll < 0.03:
            return self.pick([
                b"[]", b"\"order.status\"", b"42", b"null", b"{", b"",
                b"{\"type\": \"order.status\" \"version\": 1}", b"{\"type\": \"activity.ended\", \"x\": 1e400}",
                b"{\"type\": \"activity.ended\", \"x\": NaN}", b"{\"type\": \"\\ud800\"}",
                b"{\"type\": \"activity.ended\", \"event_id\": \"\xff\xfe\"}", b"nonsense"]) or b"{}"
        type_ = self.pick(["order.status", "order.status", "order.followers", "activity.token",
                           "activity.push_to_start_token", "activity.settings", "activity.ended"])
        e = self.valid(type_)
        roll = self.r.random()
        if roll < 0.45:
            pass
        elif roll < 0.85:
            self.break_field(e)
        elif roll < 0.93:
            self.break_field(e)
            self.break_field(e)
        elif type_ == "activity.token":
            self.late_schedule(e)
        elif roll < 0.96:
            e["type"] = self.pick(["order.cancelled", "activity.token.v2", 7])
        else:
            e["padding"] = "x" * self.pick([65000, 66000])
        ascii_only = self.r.random() < 0.2
        try:
            return json.dumps(e, ensure_ascii=ascii_only).encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(e, ensure_ascii=True).encode("utf-8")


# MARK: - The checks

def check_document(document):
    meta = json.loads(ASYNCAPI_SCHEMA.read_text())
    errors = sorted(jsonschema.Draft7Validator(meta).iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        fail("docs/asyncapi.yaml is not valid AsyncAPI 3.0.0:\n" + "\n".join(
            f"  {'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors[:10]))
    for name, schema in document["components"]["schemas"].items():
        try:
            jsonschema.Draft7Validator.check_schema(schema)
        except jsonschema.SchemaError as error:
            fail(f"components.schemas.{name} is not a valid JSON Schema (draft 07): {error.message}")
    print(f"contract: docs/asyncapi.yaml is valid AsyncAPI {document['asyncapi']} "
          f"({len(document['channels'])} channels, {len(document['components']['schemas'])} schemas)")


def property_names(schema, out):
    if isinstance(schema, dict):
        for name, sub in (schema.get("properties") or {}).items():
            out.add(name)
            property_names(sub, out)
        for key, sub in schema.items():
            if key != "properties":
                property_names(sub, out)
    elif isinstance(schema, list):
        for sub in schema:
            property_names(sub, out)
    return out


def check_fields(document):
    source = (ROOT / "Sources/LiveDeliveryCore/Events/EventDecoder.swift").read_text()
    read = set(re.findall(r"\.(?:required|optional)\w*\(\s*\"([a-z_]+)\"", source))
    schemas = document["components"]["schemas"]
    body = property_names({k: v for k, v in schemas.items() if k not in HEADER_SCHEMAS}, set())
    if read != body:
        fail(f"the decoder and the schemas read different fields: only the decoder {sorted(read - body)}, "
             f"only the schemas {sorted(body - read)}")
    routing = (ROOT / "Sources/LiveDelivery/Consuming/OrderRouting.swift").read_text()
    headers_read = set(re.findall(r"static let header = \"([a-z_]+)\"", routing))
    processor = (ROOT / "Sources/LiveDelivery/Consuming/EventProcessor.swift").read_text()
    headers_read |= set(re.findall(r"headers\[\"([a-z_]+)\"\]", processor))
    headers = property_names({k: schemas[k] for k in HEADER_SCHEMAS}, set())
    if headers_read != headers:
        fail(f"the worker and the schemas read different headers: worker {sorted(headers_read)}, "
             f"schemas {sorted(headers)}")
    print(f"contract: the decoder reads {len(read)} fields and the worker {len(headers)} headers; "
          f"the schemas name the same")


def run_decoder(binary, path):
    """{line number: (accepted, field)} from `livedelivery validate --format json`."""
    done = subprocess.run([binary, "validate", "--format", "json", str(path)], capture_output=True)
    if done.returncode not in (0, 1):
        fail(f"livedelivery validate failed ({done.returncode}): {done.stderr.decode(errors='replace')[-2000:]}")
    verdicts = {}
    for line in done.stdout.decode().splitlines():
        result = json.loads(line)
        verdicts[result["line"]] = (result["accepted"], result.get("field") or "", result.get("reason"))
    return verdicts


def compare(binary, validator, bodies, label):
    """Gives `bodies` to the schemas and to the decoder; returns the disagreements."""
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as file:
        file.write(b"\n".join(bodies) + b"\n")
        path = pathlib.Path(file.name)
    try:
        verdicts = run_decoder(binary, path)
    finally:
        path.unlink()
    disagreements = []
    counts = collections.Counter()
    for number, body in enumerate(bodies, start=1):
        if not body.strip(b" \t"):
            continue
        accepted, fields = schema_verdict(validator, body)
        decoded, field, reason = verdicts.get(number, (None, None, None))
        counts["accepted" if accepted else "refused"] += 1
        if accepted != decoded or (not decoded and field not in fields):
            disagreements.append((number, body, accepted, fields, decoded, field, reason))
    return counts, disagreements


def report(disagreements, label):
    for number, body, accepted, fields, decoded, field, reason in disagreements[:10]:
        print(f"  {label} line {number}: schema {'accepts' if accepted else 'refuses ' + str(sorted(fields))}, "
              f"decoder {'accepts' if decoded else f'refuses {reason} ({field})'}: {body[:300]!r}", file=sys.stderr)


# MARK: - The events the tests published

def published_verdict(document, validators, record, body):
    """The contract's verdict on one published message: (accepted, fields), as schema_verdict gives."""
    channels = {c["address"]: c for c in document["channels"].values()}
    channel = channels.get(record["routing_key"])
    if channel is None:
        # No channel has this address; the body's `type`, which must equal it, is wrong.
        accepted, fields = schema_verdict(validators["Event"], body)
        return False, (fields | {"type"}) - ({""} if accepted else set())
    message = document["components"]["messages"][next(iter(channel["messages"].values()))["$ref"].rsplit("/", 1)[1]]
    name = message["payload"]["$ref"].rsplit("/", 1)[1]
    validators.setdefault(name, validator_for(document, name))
    accepted, fields = schema_verdict(validators[name], body)
    # The AMQP message_id, when set, equals event_id (the document's info; no JSON Schema keyword reaches it).
    message_id = record.get("message_id")
    if message_id and (accepted or "" not in fields):
        instance = json.loads(body)
        if isinstance(instance, dict) and instance.get("event_id") != message_id:
            accepted, fields = False, fields | {"event_id"}
    return accepted, fields


def check_published(binary, document, path):
    if not path.is_file() or not path.stat().st_size:
        fail(f"{path}: no published events were recorded (LIVEDELIVERY_RECORD_EVENTS)")
    records = [json.loads(line) for line in path.read_bytes().split(b"\n") if line.strip()]
    bodies = [base64.b64decode(record["body"]) for record in records]
    validators = {name: validator_for(document, name) for name in ("Event", "TraceParent", "OrderID")}
    disagreements, traces, refused_headers, counts = [], [], [], collections.Counter()
    for number, (record, body) in enumerate(zip(records, bodies), start=1):
        accepted, fields = published_verdict(document, validators, record, body)
        decoder = record["decoder"]
        counts["valid" if accepted else "invalid"] += 1
        if accepted != decoder["accepted"] or (not accepted and (decoder.get("field") or "") not in fields):
            disagreements.append((number, body, accepted, fields, decoder["accepted"], decoder.get("field") or "",
                                  f"{decoder.get('reason')}, routing key {record['routing_key']!r}"))
        routed = record["headers"].get("order_id")
        if routed is not None:
            # Only the OrderID schema decides here: whether a cell takes the event depends on the deployment.
            if list(validators["OrderID"].iter_errors(routed)):
                refused_headers.append(f"  published line {number}: the order_id header {routed!r} is not an OrderID")
            counts["order_id header"] += 1
            if accepted:
                counts["order_id header, valid event"] += 1
                counts["order_id header equal"] += routed == json.loads(body).get("order_id")
        header = record["headers"].get("traceparent")
        if header is not None:
            read = not list(validators["TraceParent"].iter_errors(header))
            counts["traceparent read" if read else "traceparent not read"] += 1
            if read != record["traceparent_read"]:
                traces.append(f"  published line {number}: the TraceParent schema {'accepts' if read else 'refuses'} "
                              f"{header!r}, the worker {'reads' if record['traceparent_read'] else 'ignores'} it")
    # The recorded verdicts are the shipped decoder's: where the routing key and message_id decide nothing,
    # `livedelivery validate` (which takes the routing key to be `type`) gives the same.
    plain = []
    for record, body in zip(records, bodies):
        try:
            instance = json.loads(body)
        except ValueError:
            instance = None
        one_line = b"\n" not in body and b"\r" not in body and body.strip(b" \t")
        if one_line and (not isinstance(instance, dict) or (
                instance.get("type") == record["routing_key"]
                and record.get("message_id") in (None, "", instance.get("event_id")))):
            plain.append((record, body))
    verdicts = {}
    if plain:
        with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as file:
            file.write(b"\n".join(body for _, body in plain) + b"\n")
            temporary = pathlib.Path(file.name)
        try:
            verdicts = run_decoder(binary, temporary)
        finally:
            temporary.unlink()
    differ = [(body, verdicts.get(number), record["decoder"]) for number, (record, body) in enumerate(plain, start=1)
              if (verdicts.get(number) or (None, None))[:2] != (record["decoder"]["accepted"],
                                                                   record["decoder"].get("field") or "")]
    total = len(records)
    print(f"contract: {total - len(disagreements)}/{total} published events agree "
          f"({counts['valid']} valid, {counts['invalid']} invalid; schema and decoder, {path.name})")
    print(f"contract: {len(plain) - len(differ)}/{len(plain)} of them (those whose routing key and message_id decide "
          f"nothing) have the recorded decoder verdict from `livedelivery validate` too")
    headers = counts["traceparent read"] + counts["traceparent not read"]
    print(f"contract: {headers - len(traces)}/{headers} traceparent headers agree ({counts['traceparent read']} "
          f"read, {counts['traceparent not read']} malformed; the TraceParent schema and the worker's parser)")
    print(f"contract: {counts['order_id header']} order_id headers, {len(refused_headers)} not an OrderID; on the "
          f"{counts['order_id header, valid event']} valid events among them, {counts['order_id header equal']} equal "
          f"to the body's order_id, as a cell requires")
    for body, verdict, recorded in differ[:10]:
        print(f"  livedelivery validate {verdict}, recorded {recorded}: {body[:300]!r}", file=sys.stderr)
    if disagreements or traces or refused_headers:
        report(disagreements, "published")
        if traces or refused_headers:
            print("\n".join(traces[:10] + refused_headers[:10]), file=sys.stderr)
        fail("the schemas and the worker disagree on events the tests published, or a header is refused (above)")
    if differ:
        fail("`livedelivery validate` and the decoder the tests recorded differ (above): is the binary stale?")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--events", type=int, default=12000)
    parser.add_argument("--seed", type=int, default=53)
    parser.add_argument("--keep", help="also write the corpus to this file")
    parser.add_argument("--published", type=pathlib.Path, help="check only the events the tests recorded here")
    args = parser.parse_args()

    document = json.loads(json.dumps(yaml.safe_load(DOCUMENT.read_text())))
    if args.published:
        check_published(args.binary, document, args.published)
        return
    check_document(document)
    check_fields(document)
    validator = validator_for(document, "Event")

    # The document's own examples: each payload and headers against its message, and the payload through the decoder.
    examples = []
    for name, message in document["components"]["messages"].items():
        payload = validator_for(document, message["payload"]["$ref"].rsplit("/", 1)[1])
        headers = validator_for(document, message["headers"]["$ref"].rsplit("/", 1)[1])
        for example in message.get("examples", []):
            problems = list(payload.iter_errors(example["payload"])) + list(headers.iter_errors(example.get("headers", {})))
            if problems or example["payload"]["type"] != message["name"]:
                fail(f"the example {name}/{example['name']} breaks its own message: {problems[:1]}")
            examples.append(json.dumps(example["payload"]).encode())
    for path in sorted((ROOT / "examples").glob("*.jsonl")):
        examples += [line for line in path.read_bytes().split(b"\n") if line.strip()]
    counts, disagreements = compare(args.binary, validator, examples, "examples")
    if disagreements:
        report(disagreements, "examples")
        fail(f"the schemas and the decoder disagree on {len(disagreements)} example events")
    print(f"contract: {counts['accepted'] + counts['refused']} example events (docs/asyncapi.yaml, examples/*.jsonl): "
          f"{counts['accepted']} accepted by both, {counts['refused']} refused by both (the demo's bad events)")

    generator = Generator(args.seed)
    corpus = [generator.body(i) for i in range(args.events)]
    corpus = [body for body in corpus if body.strip(b" \t")]
    if args.keep:
        pathlib.Path(args.keep).write_bytes(b"\n".join(corpus) + b"\n")
    counts, disagreements = compare(args.binary, validator, corpus, "corpus")
    total = counts["accepted"] + counts["refused"]
    print(f"contract: {total} generated events (seed {args.seed}; {counts['accepted']} valid, "
          f"{counts['refused']} invalid): schema and decoder agree on {total - len(disagreements)} of {total}, "
          f"{len(disagreements)} disagreements")
    if disagreements:
        report(disagreements, "corpus")
        fail("the schemas and the worker's decoder disagree (above)")


if __name__ == "__main__":
    main()
