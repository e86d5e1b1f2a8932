package dev.dlqctl.spring;

/**
 * What the listener throws while it is told to fail (for a record not starting with
 * `transient`): the class `dlqctl status` must report.
 */
public class StockRejected extends RuntimeException {
    public StockRejected(String message) {
        super(message);
    }
}
