import type { Header, HeadersInit, Message } from "./types.js";

interface WireHeader {
  key: string;
  value?: string;
  value_base64?: string;
}

/** Wire message: {cursor, room, data | data_base64, headers, published_at}. */
export interface WireMessage {
  cursor: string;
  room?: string | null;
  data?: unknown;
  data_base64?: string;
  headers?: WireHeader[] | Record<string, string> | null;
  published_at: string;
}

/** "p-o" → [partition, offset]; undefined when malformed. */
export function parseCursor(cursor: string): [number, number] | undefined {
  const m = /^(\d{1,10})-(\d{1,19})$/.exec(cursor);
  if (!m) return undefined;
  return [Number(m[1]), Number(m[2])];
}

export function fromWire<T>(w: WireMessage): Message<T> {
  const pc = parseCursor(w.cursor);
  if (!pc) throw new TypeError(`malformed message cursor ${JSON.stringify(w.cursor)}`);
  const msg: Message<T> = {
    cursor: w.cursor,
    partition: pc[0],
    offset: pc[1],
    room: w.room ?? null,
    data: w.data as T,
    headers: headersFromWire(w.headers),
    publishedAt: w.published_at,
  };
  if (w.data_base64 !== undefined) msg.dataBase64 = w.data_base64;
  return msg;
}

/** Accepts the list of the wire contract and the object form older servers send. */
export function headersFromWire(h: WireMessage["headers"]): Header[] {
  if (!h) return [];
  if (Array.isArray(h)) {
    return h.map((x) => {
      const out: Header = { key: x.key };
      if (x.value !== undefined) out.value = x.value;
      if (x.value_base64 !== undefined) out.valueBase64 = x.value_base64;
      return out;
    });
  }
  return Object.entries(h).map(([key, value]) => ({ key, value }));
}

/** Publish headers: an object goes as is; a list in the wire's snake_case. */
export function headersToWire(h: HeadersInit | undefined): WireHeader[] | Record<string, string> | undefined {
  if (h === undefined) return undefined;
  if (!Array.isArray(h)) return h;
  return h.map((x) => {
    const out: WireHeader = { key: x.key };
    if (x.value !== undefined) out.value = x.value;
    if (x.valueBase64 !== undefined) out.value_base64 = x.valueBase64;
    return out;
  });
}

/** Highest delivered offset per partition: the SDK's half of at-least-once (spec section 3). */
export class Dedupe {
  readonly high = new Map<number, number>();

  constructor(from?: Map<number, number>) {
    if (from) for (const [p, o] of from) this.high.set(p, o);
  }

  /** True when the message is new (and records it). */
  admit(partition: number, offset: number): boolean {
    const h = this.high.get(partition);
    if (h !== undefined && offset <= h) return false;
    this.high.set(partition, offset);
    return true;
  }

  seed(cursors: string[] | Record<number, number>): void {
    const pairs: [number, number][] = Array.isArray(cursors)
      ? cursors.map((c) => parseCursor(c)).filter((x): x is [number, number] => x !== undefined)
      : Object.entries(cursors).map(([p, o]) => [Number(p), Number(o)]);
    for (const [p, o] of pairs) {
      const h = this.high.get(p);
      if (h === undefined || o > h) this.high.set(p, o);
    }
  }

  mergeInto(into: Map<number, number>): void {
    for (const [p, o] of this.high) {
      const h = into.get(p);
      if (h === undefined || o > h) into.set(p, o);
    }
  }
}
