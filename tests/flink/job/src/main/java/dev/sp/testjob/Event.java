package dev.sp.testjob;

/** A POJO record flowing through the test job. */
public class Event {
    public long key;
    public long seq;
    public long ts;
    public long count;

    public Event() {}

    public Event(long key, long seq, long ts, long count) {
        this.key = key;
        this.seq = seq;
        this.ts = ts;
        this.count = count;
    }

    @Override
    public String toString() {
        return "Event{key=" + key + ", seq=" + seq + ", ts=" + ts + ", count=" + count + "}";
    }
}
