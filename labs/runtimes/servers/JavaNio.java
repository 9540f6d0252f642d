// java.nio as Netty and most NIO servers bind: ServerSocketChannel.bind(addr), no backlog
// argument. Accepts and closes until stopped. Usage: java JavaNio.java PORT
import java.net.InetSocketAddress;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;

public class JavaNio {
    public static void main(String[] args) throws Exception {
        try (ServerSocketChannel s = ServerSocketChannel.open()) {
            s.bind(new InetSocketAddress(Integer.parseInt(args[0])));
            System.out.println("listening " + s.getLocalAddress());
            System.out.flush();
            while (true) {
                try (SocketChannel c = s.accept()) {
                    c.close();
                }
            }
        }
    }
}
