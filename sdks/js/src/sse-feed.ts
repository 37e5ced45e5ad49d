import { createParser, type EventSourceMessage, type EventSourceParser } from "eventsource-parser";

/**
 * Feeds an SSE stream to eventsource-parser line by line and reports id-only events.
 *
 * eventsource-parser follows the HTML rule that an event without data is not dispatched, so an
 * event carrying only `id:` never reaches onEvent. MsgMesh sends exactly such events to keep a
 * stream's position current (the first event of every stream, and while idle): the resume position
 * must follow them. This tap only splits lines and notes the `id` field; every field's meaning
 * (data joining, event, retry, comments) stays with the parser.
 */
export class SSEFeed {
  private readonly parser: EventSourceParser;
  private buf = "";
  private pendingId: string | undefined;
  private dispatched = 0;

  constructor(onEvent: (ev: EventSourceMessage) => void, onIdOnly: (id: string) => void) {
    this.parser = createParser({
      onEvent: (ev) => {
        this.dispatched++;
        onEvent(ev);
      },
    });
    this.onIdOnly = onIdOnly;
  }

  private readonly onIdOnly: (id: string) => void;

  feed(chunk: string): void {
    this.buf += chunk;
    for (;;) {
      const i = this.buf.search(/[\r\n]/);
      if (i === -1) return;
      // A CR at the end of the buffer may be the first half of CRLF: wait for the next chunk.
      if (this.buf[i] === "\r" && i === this.buf.length - 1) return;
      const len = this.buf[i] === "\r" && this.buf[i + 1] === "\n" ? 2 : 1;
      const line = this.buf.slice(0, i);
      this.buf = this.buf.slice(i + len);
      this.line(line);
    }
  }

  private line(line: string): void {
    if (line === "") {
      const id = this.pendingId;
      this.pendingId = undefined;
      const before = this.dispatched;
      this.parser.feed("\n");
      if (this.dispatched === before && id !== undefined) this.onIdOnly(id);
      return;
    }
    if (line.startsWith("id:")) {
      const v = line.charCodeAt(3) === 32 ? line.slice(4) : line.slice(3);
      if (!v.includes("\0")) this.pendingId = v;
    }
    this.parser.feed(line + "\n");
  }
}
