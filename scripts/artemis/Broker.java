// iotq's embedded ActiveMQ Artemis launcher: an AMQP 1.0 broker for tests and
// the lab, bound to one address only, nothing persisted, no security.
//
// Usage: java -cp CLASSES:LIB/* Broker --host 127.0.0.1 --port 5672
//            [--tls-port 5671 --keystore ks.p12 --keystore-password PW]
//            [--stop-on-eof true]
//
// Prints "ready" on standard output once every acceptor accepts a
// connection (it connects to each). Stops on
// SIGTERM/SIGINT, and with --stop-on-eof true also when standard input
// closes (tests use it, so a test that dies takes the broker with it).
import java.io.InputStream;
import java.util.concurrent.CountDownLatch;

import org.apache.activemq.artemis.core.config.Configuration;
import org.apache.activemq.artemis.core.config.impl.ConfigurationImpl;
import org.apache.activemq.artemis.core.server.embedded.EmbeddedActiveMQ;

public final class Broker {
    private Broker() {}

    public static void main(String[] args) throws Exception {
        String host = "127.0.0.1";
        int port = 5672;
        int tlsPort = 0;
        String keystore = null;
        String keystorePassword = "";
        boolean stopOnEOF = false;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                usage("missing value after " + a);
            }
            String v = args[++i];
            switch (a) {
                case "--host": host = v; break;
                case "--port": port = Integer.parseInt(v); break;
                case "--tls-port": tlsPort = Integer.parseInt(v); break;
                case "--keystore": keystore = v; break;
                case "--keystore-password": keystorePassword = v; break;
                case "--stop-on-eof": stopOnEOF = Boolean.parseBoolean(v); break;
                default: usage("unknown option " + a);
            }
        }
        if (tlsPort > 0 && keystore == null) {
            usage("--tls-port needs --keystore (PKCS12)");
        }
        Configuration cfg = new ConfigurationImpl()
            .setPersistenceEnabled(false)
            .setSecurityEnabled(false)
            .setJMXManagementEnabled(false)
            .setCriticalAnalyzer(false)
            .addAcceptorConfiguration("amqp", "tcp://" + host + ":" + port + "?protocols=AMQP");
        if (tlsPort > 0) {
            cfg.addAcceptorConfiguration("amqps", "tcp://" + host + ":" + tlsPort
                + "?protocols=AMQP;sslEnabled=true;keyStoreType=PKCS12;keyStorePath=" + keystore
                + ";keyStorePassword=" + keystorePassword);
        }
        EmbeddedActiveMQ server = new EmbeddedActiveMQ();
        server.setConfiguration(cfg);
        CountDownLatch stop = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stop.countDown();
            try {
                server.stop();
            } catch (Exception e) {
                System.err.println("artemis: stop: " + e);
            }
        }));
        server.start();
        // "ready" promises that the acceptors accept connections: connect
        // to each (a loaded host can be slow to bind them).
        String probe = host.equals("0.0.0.0") ? "127.0.0.1" : host;
        awaitListening(probe, port);
        if (tlsPort > 0) {
            awaitListening(probe, tlsPort);
        }
        System.out.println("ready");
        System.out.flush();
        if (!stopOnEOF) {
            stop.await();
            System.exit(0);
        }
        Thread stdin = new Thread(() -> {
            try {
                InputStream in = System.in;
                while (in.read() >= 0) {
                    // ignore input; end of input stops the broker
                }
            } catch (Exception e) {
                // closed
            }
            stop.countDown();
        });
        stdin.setDaemon(true);
        stdin.start();
        stop.await();
        server.stop();
        System.exit(0);
    }

    // awaitListening connects to host:port until it succeeds (60 s at most).
    private static void awaitListening(String host, int port) throws InterruptedException {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (true) {
            try (java.net.Socket s = new java.net.Socket()) {
                s.connect(new java.net.InetSocketAddress(host, port), 1000);
                return;
            } catch (java.io.IOException e) {
                if (System.nanoTime() > deadline) {
                    System.err.println("artemis: nothing listens on " + host + ":" + port + " after 60 s: " + e);
                    System.exit(1);
                }
                Thread.sleep(100);
            }
        }
    }

    private static void usage(String msg) {
        System.err.println("artemis: " + msg);
        System.err.println("usage: Broker --host ADDR --port N [--tls-port N --keystore FILE.p12 --keystore-password PW] [--stop-on-eof true]");
        System.exit(2);
    }
}
