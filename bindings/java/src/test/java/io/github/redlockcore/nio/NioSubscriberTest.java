package io.github.redlockcore.nio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.redlockcore.core.Reply;
import io.github.redlockcore.core.RespDecoder;
import io.github.redlockcore.spi.NoticeListener;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What the nio subscriber makes of the replies its connection reads, without a socket. */
class NioSubscriberTest {
  private static final String NAMED = "\0id \u00ff\r\n";
  private static final String STREAM = "*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n:1\r\n"
      + "*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$" + NAMED.length() + "\r\n" + NAMED + "\r\n"
      + "*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$0\r\n\r\n"
      + "*3\r\n$11\r\nunsubscribe\r\n$4\r\nchan\r\n:0\r\n";

  private static String text(byte[] bytes) {
    return new String(bytes, StandardCharsets.ISO_8859_1);
  }

  /** Every reply in {@code stream}, fed in two pieces split at {@code split}. */
  private static List<Reply> replies(String stream, int split) {
    byte[] bytes = stream.getBytes(StandardCharsets.ISO_8859_1);
    List<Reply> replies = new ArrayList<>();
    try (RespDecoder decoder = new RespDecoder()) {
      decoder.feed(bytes, 0, split);
      for (Reply r; (r = decoder.nextReply()) != null; ) {
        replies.add(r);
      }
      decoder.feed(bytes, split, bytes.length - split);
      for (Reply r; (r = decoder.nextReply()) != null; ) {
        replies.add(r);
      }
    }
    return replies;
  }

  /**
   * Each message's payload comes out byte for byte (the waiter a release names, or empty);
   * a confirmed subscription is reported as such (rule 13 of docs/bindings.md); an
   * unsubscription is nothing; an error reply (a refused SUBSCRIBE) is reported as such.
   */
  @Test
  void aConfirmedSubscriptionIsReported() {
    for (int split : new int[] {0, 20, 40, STREAM.length()}) {
      List<String> heard = new ArrayList<>();
      NoticeListener listener =
          (channel, message) -> heard.add(text(channel) + "=" + text(message));
      for (Reply reply : replies(STREAM, split)) {
        assertTrue(NioSubscriber.heard(reply, listener));
      }
      // A listener that does not take confirmations hears the messages alone.
      assertEquals(List.of("chan=" + NAMED, "chan="), heard, "split at " + split);
    }

    // The confirmation is told apart from a message, for the engine.
    List<String> confirmed = new ArrayList<>();
    NoticeListener listener = new NoticeListener() {
      @Override
      public void notice(byte[] channel, byte[] message) {
        confirmed.add("notice " + text(channel));
      }

      @Override
      public void subscribed(byte[] channel) {
        confirmed.add("subscribed " + text(channel));
      }
    };
    for (Reply reply : replies(STREAM, STREAM.length())) {
      NioSubscriber.heard(reply, listener);
    }
    assertEquals(List.of("subscribed chan", "notice chan", "notice chan"), confirmed);

    assertFalse(NioSubscriber.heard(
        Reply.error("NOPERM User default has no permissions to run the 'subscribe' command"),
        listener));
    assertEquals(3, confirmed.size());
  }
}
