import Foundation

/// Runs a program to completion and returns its standard output; throws on a non-zero exit.
func runProgram(_ executable: String, _ arguments: [String]) async throws -> String {
    let process = Process()
    let output = Pipe()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    try process.run()
    // Read on a dedicated thread: the output (h2load's is small) may arrive over the whole run.
    let data: Data = await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: output.fileHandleForReading.readDataToEndOfFile()) }.start()
    }
    let status: Int32 = await withCheckedContinuation { continuation in
        Thread {
            process.waitUntilExit()
            continuation.resume(returning: process.terminationStatus)
        }.start()
    }
    guard status == 0 else { throw BenchmarkError(description: "\(executable) exited with status \(status)") }
    return String(decoding: data, as: UTF8.self)
}

/// A benchmark that cannot go on, and why.
struct BenchmarkError: Error, CustomStringConvertible {
    let description: String
}
