// The project's own small msgpack codec: exactly the subset docs/protocol.md messages use
// (maps, arrays, str, bin, ints, float64, bool, nil). Why our own: see web/README.md.
//
// encode(value) -> Uint8Array; decode(Uint8Array | ArrayBuffer) -> value.
// Numbers: integers encode in the smallest int format, other numbers as float64 (like the
// server); wrap a whole number in f64(x) to force a float. bin decodes to Uint8Array; maps
// decode to plain objects (string keys only, as the protocol has).

export class Float64 {
  constructor(value) { this.value = value; }
}

export function f64(value) { return new Float64(value); }

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder("utf-8", { fatal: true });

class Writer {
  constructor() { this.buf = new Uint8Array(256); this.view = new DataView(this.buf.buffer); this.pos = 0; }
  reserve(n) {
    if (this.pos + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v) { this.reserve(1); this.view.setUint8(this.pos, v); this.pos += 1; }
  u16(v) { this.reserve(2); this.view.setUint16(this.pos, v); this.pos += 2; }
  u32(v) { this.reserve(4); this.view.setUint32(this.pos, v); this.pos += 4; }
  i8(v) { this.reserve(1); this.view.setInt8(this.pos, v); this.pos += 1; }
  i16(v) { this.reserve(2); this.view.setInt16(this.pos, v); this.pos += 2; }
  i32(v) { this.reserve(4); this.view.setInt32(this.pos, v); this.pos += 4; }
  u64(v) { this.reserve(8); this.view.setBigUint64(this.pos, BigInt(v)); this.pos += 8; }
  i64(v) { this.reserve(8); this.view.setBigInt64(this.pos, BigInt(v)); this.pos += 8; }
  f64(v) { this.reserve(9); this.view.setUint8(this.pos, 0xcb); this.view.setFloat64(this.pos + 1, v); this.pos += 9; }
  bytes(b) { this.reserve(b.length); this.buf.set(b, this.pos); this.pos += b.length; }
  result() { return this.buf.slice(0, this.pos); }
}

function writeInt(w, v) {
  if (v >= 0) {
    if (v < 0x80) w.u8(v);
    else if (v < 0x100) { w.u8(0xcc); w.u8(v); }
    else if (v < 0x10000) { w.u8(0xcd); w.u16(v); }
    else if (v < 0x100000000) { w.u8(0xce); w.u32(v); }
    else { w.u8(0xcf); w.u64(v); }
  } else {
    if (v >= -32) w.i8(v);
    else if (v >= -0x80) { w.u8(0xd0); w.i8(v); }
    else if (v >= -0x8000) { w.u8(0xd1); w.i16(v); }
    else if (v >= -0x80000000) { w.u8(0xd2); w.i32(v); }
    else { w.u8(0xd3); w.i64(v); }
  }
}

function writeLength(w, n, fix, fixMax, c8, c16, c32) {
  if (n <= fixMax && fix !== null) w.u8(fix | n);
  else if (n < 0x100 && c8 !== null) { w.u8(c8); w.u8(n); }
  else if (n < 0x10000) { w.u8(c16); w.u16(n); }
  else { w.u8(c32); w.u32(n); }
}

function write(w, value) {
  if (value === null || value === undefined) w.u8(0xc0);
  else if (value === false) w.u8(0xc2);
  else if (value === true) w.u8(0xc3);
  else if (value instanceof Float64) w.f64(value.value);
  else if (typeof value === "number") {
    if (Number.isSafeInteger(value)) writeInt(w, value);
    else w.f64(value);
  } else if (typeof value === "string") {
    const b = textEncoder.encode(value);
    writeLength(w, b.length, 0xa0, 31, 0xd9, 0xda, 0xdb);
    w.bytes(b);
  } else if (value instanceof Uint8Array || value instanceof ArrayBuffer) {
    const b = value instanceof Uint8Array ? value : new Uint8Array(value);
    writeLength(w, b.length, null, -1, 0xc4, 0xc5, 0xc6);
    w.bytes(b);
  } else if (Array.isArray(value)) {
    writeLength(w, value.length, 0x90, 15, null, 0xdc, 0xdd);
    for (const item of value) write(w, item);
  } else if (typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    writeLength(w, entries.length, 0x80, 15, null, 0xde, 0xdf);
    for (const [k, v] of entries) { write(w, k); write(w, v); }
  } else {
    throw new TypeError(`msgpack: cannot encode a ${typeof value}`);
  }
}

export function encode(value) {
  const w = new Writer();
  write(w, value);
  return w.result();
}

class Reader {
  constructor(bytes) {
    this.buf = bytes;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.pos = 0;
  }
  need(n) { if (this.pos + n > this.buf.length) throw new RangeError("msgpack: truncated input"); }
  u8() { this.need(1); return this.view.getUint8(this.pos++); }
  take(fn, n) { this.need(n); const v = fn.call(this.view, this.pos); this.pos += n; return v; }
  bytes(n) { this.need(n); const b = this.buf.slice(this.pos, this.pos + n); this.pos += n; return b; }
  str(n) { return textDecoder.decode(this.bytes(n)); }
}

function bigToNumber(v) {
  if (v > BigInt(Number.MAX_SAFE_INTEGER) || v < BigInt(Number.MIN_SAFE_INTEGER)) return v;
  return Number(v);
}

function readArray(r, n) { const out = []; for (let i = 0; i < n; i++) out.push(read(r)); return out; }

function readMap(r, n) {
  const out = {};
  for (let i = 0; i < n; i++) {
    const k = read(r);
    if (typeof k !== "string") throw new TypeError("msgpack: map keys must be strings");
    out[k] = read(r);
  }
  return out;
}

function read(r) {
  const c = r.u8();
  if (c <= 0x7f) return c;
  if (c >= 0xe0) return c - 0x100;
  if ((c & 0xf0) === 0x80) return readMap(r, c & 0x0f);
  if ((c & 0xf0) === 0x90) return readArray(r, c & 0x0f);
  if ((c & 0xe0) === 0xa0) return r.str(c & 0x1f);
  const v = r.view;
  switch (c) {
    case 0xc0: return null;
    case 0xc2: return false;
    case 0xc3: return true;
    case 0xc4: return r.bytes(r.u8());
    case 0xc5: return r.bytes(r.take(v.getUint16, 2));
    case 0xc6: return r.bytes(r.take(v.getUint32, 4));
    case 0xca: return r.take(v.getFloat32, 4);
    case 0xcb: return r.take(v.getFloat64, 8);
    case 0xcc: return r.u8();
    case 0xcd: return r.take(v.getUint16, 2);
    case 0xce: return r.take(v.getUint32, 4);
    case 0xcf: return bigToNumber(r.take(v.getBigUint64, 8));
    case 0xd0: return r.take(v.getInt8, 1);
    case 0xd1: return r.take(v.getInt16, 2);
    case 0xd2: return r.take(v.getInt32, 4);
    case 0xd3: return bigToNumber(r.take(v.getBigInt64, 8));
    case 0xd9: return r.str(r.u8());
    case 0xda: return r.str(r.take(v.getUint16, 2));
    case 0xdb: return r.str(r.take(v.getUint32, 4));
    case 0xdc: return readArray(r, r.take(v.getUint16, 2));
    case 0xdd: return readArray(r, r.take(v.getUint32, 4));
    case 0xde: return readMap(r, r.take(v.getUint16, 2));
    case 0xdf: return readMap(r, r.take(v.getUint32, 4));
    default: throw new TypeError(`msgpack: unsupported type byte 0x${c.toString(16)}`);
  }
}

export function decode(data) {
  const bytes = data instanceof Uint8Array ? data : new Uint8Array(data);
  const r = new Reader(bytes);
  const value = read(r);
  if (r.pos !== bytes.length) throw new RangeError("msgpack: trailing bytes after the message");
  return value;
}
