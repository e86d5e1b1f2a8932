package dev.dlqctl.spring;

/** What the listener throws while it is told to fail: the class `dlqctl status` must report. */
public class StockRejected extends RuntimeException {
    public StockRejected(String message) {
        super(message);
    }
}
