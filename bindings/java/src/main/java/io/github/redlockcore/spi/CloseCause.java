package io.github.redlockcore.spi;

/** Why a node's connection closed, as the core's error classes name it. */
public enum CloseCause {
  REFUSED("refused"),
  AUTH("auth"),
  TLS("tls"),
  TIMEOUT("timeout"),
  OTHER("other");

  private final String code;

  CloseCause(String code) {
    this.code = code;
  }

  public String code() {
    return code;
  }
}
