package io.github.redlockcore.core;

/** What an operation asks for next: {@link Send}, {@link Wait} or {@link Finished}. */
public abstract class Output {
  private Output() {}

  /** Send this command to its node now. */
  public static final class Send extends Output {
    private final Command command;

    Send(Command command) {
      this.command = command;
    }

    public Command command() {
      return command;
    }

    @Override
    public String toString() {
      return "Send(" + command + ")";
    }
  }

  /** Nothing until a reply arrives or this instant passes; then call handleTimeout. */
  public static final class Wait extends Output {
    private final long until;

    Wait(long until) {
      this.until = until;
    }

    public long until() {
      return until;
    }

    @Override
    public String toString() {
      return "Wait(" + until + ")";
    }
  }

  /** The operation is finished with this outcome. */
  public static final class Finished extends Output {
    private final Outcome outcome;

    Finished(Outcome outcome) {
      this.outcome = outcome;
    }

    public Outcome outcome() {
      return outcome;
    }

    @Override
    public String toString() {
      return "Finished(" + outcome + ")";
    }
  }
}
