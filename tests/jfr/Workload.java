// Workload.java: a small Java program whose flight recording is the JFR
// fixture of proflink's JFR tests (tests/jfr/README.md tells how to record
// it again). It burns CPU in two known methods, allocates byte arrays and
// object lists, contends on one monitor and parks threads, so the recording
// has jdk.ExecutionSample, jdk.NativeMethodSample (a thread waiting in
// accept()), jdk.ObjectAllocationSample / InNewTLAB / OutsideTLAB,
// jdk.JavaMonitorEnter and jdk.ThreadPark events; it keeps some of what
// retain() allocates alive to the end, for jdk.OldObjectSample (live objects).
package proflink.fixture;

import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

public final class Workload {
    private static final Object MONITOR = new Object();
    private static final ReentrantLock LOCK = new ReentrantLock();
    static volatile long sink;
    static final List<byte[]> RETAINED = new ArrayList<>();

    static long burnPrimes(long until) {
        long count = 0;
        for (long n = 2; n < until; n++) {
            boolean prime = true;
            for (long d = 2; d * d <= n; d++)
                if (n % d == 0) {
                    prime = false;
                    break;
                }
            if (prime)
                count++;
        }
        return count;
    }

    static double burnMath(int rounds) {
        double x = 0;
        for (int i = 0; i < rounds; i++)
            x += Math.sqrt(i) * Math.sin(i);
        return x;
    }

    static int allocate(int rounds) {
        int total = 0;
        for (int i = 0; i < rounds; i++) {
            byte[] small = new byte[64 + (i % 512)];
            List<String> list = new ArrayList<>();
            for (int j = 0; j < 16; j++)
                list.add("item-" + j);
            total += small.length + list.size();
            if (i % 1000 == 0) {
                byte[] big = new byte[2 << 20]; // outside any TLAB
                total += big.length;
            }
        }
        return total;
    }

    static int retain(int rounds) {
        for (int i = 0; i < rounds; i++)
            RETAINED.add(new byte[4096 + i % 64]);
        return RETAINED.size();
    }

    static void holdMonitor(long millis) {
        synchronized (MONITOR) {
            long end = System.nanoTime() + millis * 1_000_000L;
            while (System.nanoTime() < end)
                sink += burnPrimes(200);
        }
    }

    static void parkUnderLock(long millis) {
        LOCK.lock();
        try {
            LockSupport.parkNanos(millis * 1_000_000L);
        } finally {
            LOCK.unlock();
        }
    }

    public static void main(String[] args) throws Exception {
        long seconds = args.length > 0 ? Long.parseLong(args[0]) : 3;
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        Thread[] contenders = new Thread[3];
        for (int t = 0; t < contenders.length; t++) {
            contenders[t] = new Thread(() -> {
                while (System.nanoTime() < end) {
                    holdMonitor(20);
                    parkUnderLock(5);
                }
            }, "contender-" + t);
            contenders[t].start();
        }
        Thread waiter = new Thread(() -> {
            try (ServerSocket server = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                server.setSoTimeout(200);
                while (System.nanoTime() < end) {
                    try {
                        server.accept().close();
                    } catch (SocketTimeoutException e) {
                        // nobody connects: the thread waits in native code
                    }
                }
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "native-waiter");
        waiter.start();
        while (System.nanoTime() < end) {
            sink += burnPrimes(40_000);
            sink += (long) burnMath(400_000);
            sink += allocate(20_000);
            sink += retain(200);
        }
        for (Thread t : contenders)
            t.join();
        waiter.join();
        System.out.println("done " + sink);
    }
}
