package io.github.redlockcore.internal;

import io.github.redlockcore.RedlockNativeException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Locale;

/**
 * Loads the native library once, at first use.
 *
 * <p>With the system property {@value #PATH_PROPERTY} set, that file is loaded. Otherwise
 * the library is read from this jar under {@code redlock/native/<os>/<arch>/} (for example
 * {@code redlock/native/linux/amd64/libredlock_jni.so}), copied to a temporary file
 * (deleted when the JVM exits) and loaded from there.
 */
public final class NativeLibrary {
  /** The system property naming a library file to load instead of the bundled one. */
  public static final String PATH_PROPERTY = "redlock.native.path";

  private static final String NAME = "redlock_jni";

  private NativeLibrary() {}

  static synchronized void load() {
    String path = System.getProperty(PATH_PROPERTY);
    try {
      if (path != null && !path.isEmpty()) {
        Path file = Paths.get(path).toAbsolutePath();
        if (!Files.isRegularFile(file)) {
          throw new RedlockNativeException(
              "library_missing",
              "the native library given by -D" + PATH_PROPERTY + " does not exist: " + file);
        }
        System.load(file.toString());
        return;
      }
      String resource = resourcePath();
      try (InputStream in = NativeLibrary.class.getClassLoader().getResourceAsStream(resource)) {
        if (in == null) {
          throw new RedlockNativeException(
              "library_missing",
              "no native library for this platform in the jar (looked for "
                  + resource
                  + "); build it with bindings/java/build.sh, or point -D"
                  + PATH_PROPERTY
                  + " at a library file");
        }
        Path file = Files.createTempFile("redlock-jni-", "-" + System.mapLibraryName(NAME));
        file.toFile().deleteOnExit();
        Files.copy(in, file, StandardCopyOption.REPLACE_EXISTING);
        System.load(file.toString());
      }
    } catch (IOException e) {
      throw new RedlockNativeException(
          "library_missing", "could not extract the native library: " + e.getMessage());
    } catch (UnsatisfiedLinkError e) {
      throw new RedlockNativeException(
          "library_missing", "could not load the native library: " + e.getMessage());
    }
  }

  /** The jar resource for this platform, {@code redlock/native/<os>/<arch>/<file>}. */
  public static String resourcePath() {
    return "redlock/native/" + os() + "/" + arch() + "/" + System.mapLibraryName(NAME);
  }

  static String os() {
    String name = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
    if (name.startsWith("linux")) {
      return "linux";
    }
    if (name.startsWith("mac") || name.startsWith("darwin")) {
      return "darwin";
    }
    if (name.startsWith("windows")) {
      return "windows";
    }
    return name.replaceAll("[^a-z0-9]", "");
  }

  static String arch() {
    String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
    switch (arch) {
      case "amd64":
      case "x86_64":
        return "amd64";
      case "aarch64":
      case "arm64":
        return "aarch64";
      default:
        return arch.replaceAll("[^a-z0-9]", "");
    }
  }
}
